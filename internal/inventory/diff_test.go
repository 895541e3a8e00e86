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

package inventory

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func slice(devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: devices}}
}

func dev(name, product, uuid string, mib int64) resourceapi.Device {
	return resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"productName": {StringValue: &product},
			"uuid":        {StringValue: &uuid},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: *resource.NewQuantity(mib<<20, resource.BinarySI)},
		},
	}
}

func TestDiff(t *testing.T) {
	real := []*resourceapi.ResourceSlice{slice(dev("gpu-0", "NVIDIA H100 80GB HBM3", "GPU-a", 81559), dev("gpu-1", "NVIDIA H100 80GB HBM3", "GPU-b", 81559))}
	if d := Diff(real, []*resourceapi.ResourceSlice{slice(dev("gpu-0", "NVIDIA H100 80GB HBM3", "GPU-x", 81559), dev("gpu-1", "NVIDIA H100 80GB HBM3", "GPU-y", 81559))}); len(d) != 0 {
		t.Errorf("the same hardware with other UUIDs differs: %v", d)
	}
	fake := []*resourceapi.ResourceSlice{slice(dev("gpu-0", "NVIDIA H100 80GB HBM3", "GPU-x", 81920))}
	got := strings.Join(Diff(real, fake), "\n")
	for _, want := range []string{
		"device gpu-0: capacity memory is 81559Mi here, 80Gi in the comparison",
		"device gpu-1: only here",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
}

// Two trays of different racks, or a tray and the fake one, differ in
// their NVLink domain and tray index but are the same hardware; a tray
// whose fabric is not ready lacks the domain, which is reported.
func TestDiffNVLinkDomain(t *testing.T) {
	tray := func(domain string, trayIndex int64) resourceapi.Device {
		d := dev("gpu-0", "NVIDIA GB200", "GPU-a", 189471)
		if domain != "" {
			d.Attributes["nvlinkDomain"] = resourceapi.DeviceAttribute{StringValue: &domain}
			d.Attributes["trayIndex"] = resourceapi.DeviceAttribute{IntValue: &trayIndex}
		}
		return d
	}
	if d := Diff([]*resourceapi.ResourceSlice{slice(tray("a.2", 4))}, []*resourceapi.ResourceSlice{slice(tray("b.32766", 15))}); len(d) != 0 {
		t.Errorf("trays of two racks differ: %v", d)
	}
	got := strings.Join(Diff([]*resourceapi.ResourceSlice{slice(tray("", 0))}, []*resourceapi.ResourceSlice{slice(tray("b.32766", 15))}), "\n")
	if !strings.Contains(got, "device gpu-0: attribute nvlinkDomain is absent here") {
		t.Errorf("a tray without its domain: %s", got)
	}
}
