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
)

// addTopologyAttributes adds the standard pciBusID, pcieRoot and numaNode
// attributes for a GPU at busID. sysfsRoot is the host root the backend
// reports (backend.Backend.SysfsRoot: "/" on a real node, a directory under
// the fake backend); sysfs is below it, in sys/. Empty means "/".
//
// An empty bus ID adds nothing: discovery could not tell, and a selector
// must not see a made-up address. A malformed one is an error, because it
// means discovery is broken and would otherwise silently lose topology.
//
// pcieRoot and numaNode come from sysfs and are left out whenever sysfs
// cannot answer: no sysfs at all (tests, a fake backend without a tree),
// a device whose sysfs path does not start at a PCI root (some hypervisors
// put GPUs below a VMBus or platform device), or numa_node = -1 (single-
// socket machines and many VMs). All of them are normal, and matchAttribute
// already treats a device without the attribute as "no match" rather than
// as an error.
func addTopologyAttributes(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, busID, sysfsRoot string) error {
	if busID == "" {
		return nil
	}
	found, err := topologyAttributes(busID, sysfsRoot)
	if err != nil {
		return err
	}
	for _, a := range found {
		// A copy, so that no caller can change the cached value through
		// the pointers in its own result.
		attrs[a.Name] = *a.Value.DeepCopy()
	}
	return nil
}
