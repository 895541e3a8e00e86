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

package main

import "github.com/gpudra/gpudra/internal/slicebuilder"

// spareGPUsUsage is the help of the offline commands' --mig-spare-gpus.
const spareGPUsUsage = "as the plugin's --mig-spare-gpus: a number from 1, all, or fleet (each fake node as one that gpudra-controller keeps a spare on, like 1: any node with a free GPU can be given one, and which will be is the controller's choice at the time)"

// parseOfflineSpares reads --mig-spare-gpus for a fake node. In fleet mode
// a real node publishes a spare only while the controller assigns it one,
// and a claim that fits a spare waits for (at most) the next such node, so
// the fake nodes are the nodes that keep one: a claim that needs more than
// one node's spares is Pending either way, and one that fits is not
// refused.
func parseOfflineSpares(s string) (slicebuilder.SpareGPUs, error) {
	spare, err := slicebuilder.ParseSpareGPUs(s)
	if err != nil || !spare.Fleet {
		return spare, err
	}
	return slicebuilder.FleetAssigned(slicebuilder.DefaultSpareGPUs), nil
}
