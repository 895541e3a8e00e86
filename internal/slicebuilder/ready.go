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

package slicebuilder

import "github.com/gpudra/gpudra/internal/gpu"

// Publish what can be given, when it can be given: every MIG placement a
// node publishes is a device that the scheduler converts on every Filter
// call of every pod it places, and that the API server and every informer
// hold, whether anyone asks for partitions or not. So a node publishes
// the placements of the GPUs that can take the next partition claims:
//
//   - GPUs whose partitions claims hold (the next partition packs beside
//     them);
//   - GPUs that can only be used as partitions: an admin's instances are
//     on them, or MIG mode is on and turning it off needs a reset
//     (Ampere);
//   - GPUs whose placements the previous publish held and that are still
//     free (sticky: see Options.MigReady);
//   - and free GPUs, from the highest minor down, until SpareGPUs of the
//     published ones are free and healthy: the spares. When a partition
//     claim takes a spare, the next publish makes another GPU a spare.
//
// A GPU that a claim holds whole publishes none: nothing of it can be
// given until the claim lets go. Whole GPUs are always published.

// migCandidate is a partitionable GPU with placements to publish.
type migCandidate struct {
	uuid string
	use  gpu.Use
	// admin: an admin's MIG instances are on the GPU.
	admin bool
	// onlyMIG: the GPU cannot be given whole (admin instances, or MIG
	// mode on where turning it off needs a reset).
	onlyMIG  bool
	healthy  bool
	wasReady bool
}

// free says whether nothing holds any part of the GPU.
func (c migCandidate) free() bool { return c.use == gpu.Unused && !c.admin }

// readyGPUs decides which GPUs publish their placements (by UUID);
// candidates are in minor order.
func readyGPUs(candidates []migCandidate, spare SpareGPUs) map[string]bool {
	ready := map[string]bool{}
	spares := 0
	for _, c := range candidates {
		if c.use == gpu.UsedWhole {
			continue
		}
		if spare.All || c.use == gpu.UsedByMIG || c.onlyMIG || c.wasReady {
			ready[c.uuid] = true
			if c.free() && c.healthy {
				spares++
			}
		}
	}
	for i := len(candidates) - 1; i >= 0 && spares < spare.count(); i-- {
		c := candidates[i]
		if !ready[c.uuid] && c.free() && c.healthy {
			ready[c.uuid] = true
			spares++
		}
	}
	return ready
}
