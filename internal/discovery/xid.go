/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package discovery

import "fmt"

// DefaultIgnoredXIDs are XIDs that an application causes (an illegal
// memory access, a kill, a reset channel): the GPU stays healthy, and
// marking it unhealthy would take a node's capacity down with every buggy
// job. The list is the one NVIDIA's device plugin skips; the plugin's
// --ignored-xids replaces it.
var DefaultIgnoredXIDs = []uint64{
	13,  // graphics engine exception
	31,  // GPU memory page fault
	43,  // GPU stopped processing (application)
	45,  // preemptive cleanup after a kill
	68,  // NVDEC0 exception
	109, // context switch timeout
}

// xidFallenOffTheBus is the XID of a GPU that fell off the bus.
const xidFallenOffTheBus = 79

// xidDescriptions name the XIDs an operator meets most, for the reason of
// a health event.
var xidDescriptions = map[uint64]string{
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping event",
	64:  "ECC page retirement or row remapping failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
	140: "unrecovered ECC error",
}

// xidReason is the reason of a health event for an XID.
func xidReason(xid uint64) string {
	if d, ok := xidDescriptions[xid]; ok {
		return fmt.Sprintf("XID %d: %s", xid, d)
	}
	return fmt.Sprintf("XID %d", xid)
}
