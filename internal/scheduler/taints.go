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

package scheduler

import (
	resourceapi "k8s.io/api/resource/v1"
)

// ApplyTaintRules returns the slices with the taints of DeviceTaintRules
// added to the devices they select (driver, pool and device name, each
// optional; a rule without a selector selects nothing), as the scheduler
// sees slices when DRADeviceTaintRules is on.
// Slices with no tainted device are returned as they are; the others are
// copies.
func ApplyTaintRules(slices []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, len(slices))
	for i, s := range slices {
		out[i] = s
		for j := range s.Spec.Devices {
			for _, r := range rules {
				if !selects(r.Spec.DeviceSelector, s, s.Spec.Devices[j].Name) {
					continue
				}
				if out[i] == s {
					out[i] = s.DeepCopy()
				}
				d := &out[i].Spec.Devices[j]
				d.Taints = append(d.Taints, r.Spec.Taint)
			}
		}
	}
	return out
}

func selects(sel *resourceapi.DeviceTaintSelector, s *resourceapi.ResourceSlice, device string) bool {
	return RuleSelects(sel, s.Spec.Driver, s.Spec.Pool.Name, device)
}

// RuleSelects says whether a DeviceTaintRule's selector selects the
// device of the driver in the pool (each field optional; no selector
// selects nothing).
func RuleSelects(sel *resourceapi.DeviceTaintSelector, driver, pool, device string) bool {
	if sel == nil {
		return false
	}
	return (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == pool) &&
		(sel.Device == nil || *sel.Device == device)
}
