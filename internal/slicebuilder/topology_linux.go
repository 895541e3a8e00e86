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
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// topologyCache remembers the topology of devices that sysfs knows, by
// host root and bus ID. Every deviceattribute call compiles a regular
// expression, which made these lookups 85% of Build's allocations, and
// Build runs at start-up and on every health change. A device's place in the
// PCI tree and its NUMA node cannot change while it is present, so a
// result is final once sysfs has the device; a device sysfs does not know
// (yet) is looked up again next time.
var topologyCache sync.Map // topologyKey → []deviceattribute.DeviceAttribute

type topologyKey struct{ root, busID string }

func topologyAttributes(busID, sysfsRoot string) ([]deviceattribute.DeviceAttribute, error) {
	if sysfsRoot == "" {
		sysfsRoot = "/"
	}
	key := topologyKey{sysfsRoot, busID}
	if cached, ok := topologyCache.Load(key); ok {
		return cached.([]deviceattribute.DeviceAttribute), nil
	}

	bus, err := deviceattribute.GetPCIBusIDAttribute(busID)
	if err != nil {
		return nil, fmt.Errorf("PCI bus ID: %w", err)
	}
	out := []deviceattribute.DeviceAttribute{bus}
	sysfs := deviceattribute.WithFSFromRoot(filepath.Join(sysfsRoot, "sys"))
	root, rootErr := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, sysfs)
	if rootErr == nil {
		out = append(out, root)
	}
	if numa, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(busID, deviceattribute.ScalarAttribute, sysfs); err == nil {
		out = append(out, numa)
	}
	if rootErr == nil {
		topologyCache.Store(key, out)
	}
	return out, nil
}
