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
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

func TestValidate(t *testing.T) {
	okDevice := func(name string) resourceapi.Device {
		return resourceapi.Device{
			Name:       name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{AttrType: stringAttr(TypeGPU)},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapMemory: {Value: resource.MustParse("1Gi")}},
		}
	}
	devices := func(n int, mutate func(*resourceapi.Device)) []resourceapi.Device {
		out := make([]resourceapi.Device, n)
		for i := range out {
			out[i] = okDevice("gpu-" + itoa(i))
			if mutate != nil {
				mutate(&out[i])
			}
		}
		return out
	}
	withDevice := func(mutate func(*resourceapi.Device)) []resourceapi.Device { return devices(1, mutate) }
	tainted := func(d *resourceapi.Device) {
		d.Taints = []resourceapi.DeviceTaint{{Key: "gpu.gpudra.io/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}

	tests := []struct {
		name    string
		slices  []resourceslice.Slice
		wantErr string // "" means valid
	}{
		{name: "128 plain devices fit", slices: []resourceslice.Slice{{Devices: devices(128, nil)}}},
		{name: "129 plain devices do not", slices: []resourceslice.Slice{{Devices: devices(129, nil)}}, wantErr: "129 devices, more than the limit of 128"},
		{name: "64 tainted devices fit", slices: []resourceslice.Slice{{Devices: devices(64, tainted)}}},
		{
			name: "one taint lowers the limit to 64",
			slices: []resourceslice.Slice{{Devices: devices(65, func(d *resourceapi.Device) {
				if d.Name == "gpu-7" {
					tainted(d)
				}
			})}},
			wantErr: "65 devices, more than the limit of 64",
		},
		{
			name: "list attributes lower the limit to 64",
			slices: []resourceslice.Slice{{Devices: devices(65, func(d *resourceapi.Device) {
				d.Attributes["numaNodes"] = resourceapi.DeviceAttribute{IntValues: []int64{0, 1}}
			})}},
			wantErr: "more than the limit of 64",
		},
		{
			name:    "devices and counters in one slice",
			slices:  []resourceslice.Slice{{Devices: withDevice(nil), SharedCounters: []resourceapi.CounterSet{{Name: "c"}}}},
			wantErr: "both devices and shared counters",
		},
		{
			name:    "9 counter sets",
			slices:  []resourceslice.Slice{{SharedCounters: make([]resourceapi.CounterSet, 9)}},
			wantErr: "9 counter sets",
		},
		{
			name:    "duplicate device across slices",
			slices:  []resourceslice.Slice{{Devices: withDevice(nil)}, {Devices: withDevice(nil)}},
			wantErr: `device "gpu-0" is in slice 0 and slice 1`,
		},
		{
			name:    "device name not a DNS label",
			slices:  []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) { d.Name = "GPU_0" })}},
			wantErr: `device "GPU_0": name`,
		},
		{
			name: "33 attributes and capacities",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				for i := range 31 {
					d.Attributes[resourceapi.QualifiedName("a"+itoa(i))] = intAttr(1)
				}
			})}},
			wantErr: "33 attributes and capacities",
		},
		{
			name: "attribute ID longer than 32",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes[resourceapi.QualifiedName(strings.Repeat("a", 33))] = intAttr(1)
			})}},
			wantErr: "ID longer than 32",
		},
		{
			name: "attribute name not a C identifier",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes["product-name"] = stringAttr("x")
			})}},
			wantErr: `attribute "product-name": ID`,
		},
		{
			name: "attribute domain not a DNS subdomain",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes["Example.COM/x"] = stringAttr("x")
			})}},
			wantErr: `attribute "Example.COM/x": domain`,
		},
		{
			name: "attribute with two values",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes["x"] = resourceapi.DeviceAttribute{IntValue: ptrTo[int64](1), BoolValue: ptrTo(true)}
			})}},
			wantErr: "2 values set",
		},
		{
			name: "version not semver",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes[AttrDriverVersion] = versionAttr("560.28.03")
			})}},
			wantErr: "not a semantic version",
		},
		{
			name: "more than 48 attribute values",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Attributes["many"] = resourceapi.DeviceAttribute{IntValues: make([]int64, 48)}
			})}},
			wantErr: "49 attribute values",
		},
		{
			name: "negative capacity",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				d.Capacity[CapMemory] = resourceapi.DeviceCapacity{Value: resource.MustParse("-1")}
			})}},
			wantErr: "negative value",
		},
		{
			name: "taint value not a label value",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				tainted(d)
				d.Taints[0].Value = "XID 79: fallen off the bus"
			})}},
			wantErr: "value",
		},
		{
			name: "taint without effect",
			slices: []resourceslice.Slice{{Devices: withDevice(func(d *resourceapi.Device) {
				tainted(d)
				d.Taints[0].Effect = ""
			})}},
			wantErr: "effect is empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"node-a": {Slices: tt.slices}}}
			err := Validate(testDriver, res)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
