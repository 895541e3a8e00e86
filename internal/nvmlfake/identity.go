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

package nvmlfake

import (
	"fmt"

	"github.com/google/uuid"
)

// uuidNamespace seeds every fake UUID, so that they are stable for a node
// and differ from any real GPU's.
var uuidNamespace = uuid.MustParse("6f0c3b8e-4a8e-4b8a-9d6c-67707564726a")

// gpuUUID is the UUID of GPU index on the node. It depends on the model
// too: a node whose profile changes has different GPUs, and must not pick
// up MIG state recorded for the old ones.
func gpuUUID(nodeName string, index int, m *model) string {
	seed := fmt.Sprintf("gpu/%s/%d/%s", nodeName, index, m.key)
	return "GPU-" + uuid.NewSHA1(uuidNamespace, []byte(seed)).String()
}

// migUUID is the UUID of a MIG device: stable for the same GPU and the
// same GPU and compute instance placements, so that a MIG device that is
// recreated where it was looks the same.
func migUUID(parentUUID string, gi giState, ci ciState) string {
	seed := fmt.Sprintf("mig/%s/%d/%d/%d/%d/%d", parentUUID, gi.ProfileID, gi.Start, ci.ProfileID, ci.Start, ci.Size)
	return "MIG-" + uuid.NewSHA1(uuidNamespace, []byte(seed)).String()
}
