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

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

// healthTaints returns the taints for a GPU in the given health state.
//
// Only Unhealthy taints. Unknown does not: it is what a GPU reports before
// the health monitor has seen it (start-up, a monitor that cannot run), and
// tainting then would make every GPU of a fresh node unschedulable for no
// reason. A GPU missing from the map is treated the same way.
//
// The effect is NoSchedule, not NoExecute: the scheduler stops picking the
// GPU, but pods already running on it are left to fail or finish on their
// own, because many XIDs are caused by the application and do not mean the
// next workload would fail too.
//
// TimeAdded stays nil: the API server fills it in, and the ResourceSlice
// controller treats a nil TimeAdded as equal to a stored one, so an
// unchanged taint causes no write.
func healthTaints(driverName string, h gpu.Health) []resourceapi.DeviceTaint {
	if h != gpu.Unhealthy {
		return nil
	}
	return []resourceapi.DeviceTaint{{
		Key:    UnhealthyTaintKey(driverName),
		Value:  UnhealthyTaintValue,
		Effect: resourceapi.DeviceTaintEffectNoSchedule,
	}}
}
