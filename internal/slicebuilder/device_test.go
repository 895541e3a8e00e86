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
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestBuildWholeGPUs(t *testing.T) {
	str := stringAttr
	ver := versionAttr
	num := intAttr
	flag := boolAttr
	tests := []struct {
		device   string
		attrs    map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		capacity map[resourceapi.QualifiedName]string
	}{
		{
			device: "gpu-0",
			attrs: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str("GPU-h100-0000"),
				"index":                           num(0),
				"minor":                           num(0),
				"productName":                     str("NVIDIA H100 80GB HBM3"),
				"brand":                           str("Nvidia"),
				"architecture":                    str("Hopper"),
				"cudaComputeCapability":           ver("9.0.0"),
				"driverVersion":                   ver("560.28.3"),
				"cudaDriverVersion":               ver("12.6.0"),
				"migCapable":                      flag(true),
				"nvlinkGroup":                     num(0),
				"resource.kubernetes.io/pciBusID": str("0000:1b:00.0"),
			},
			capacity: map[resourceapi.QualifiedName]string{"memory": "81559Mi", "multiprocessors": "132"},
		},
		{
			device: "gpu-3",
			attrs: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str("GPU-a100-0003"),
				"index":                           num(1),
				"minor":                           num(3),
				"productName":                     str("NVIDIA A100-SXM4-40GB"),
				"brand":                           str("Nvidia"),
				"architecture":                    str("Ampere"),
				"cudaComputeCapability":           ver("8.0.0"),
				"driverVersion":                   ver("560.28.3"),
				"cudaDriverVersion":               ver("12.6.0"),
				"migCapable":                      flag(true),
				"nvlinkGroup":                     num(1),
				"resource.kubernetes.io/pciBusID": str("0000:3b:00.0"),
			},
			capacity: map[resourceapi.QualifiedName]string{"memory": "40Gi", "multiprocessors": "108"},
		},
		{
			// Multiprocessors unknown: the capacity is left out, not 0.
			device: "gpu-7",
			attrs: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str("GPU-l4-0007"),
				"index":                           num(2),
				"minor":                           num(7),
				"productName":                     str("NVIDIA L4"),
				"brand":                           str("Nvidia"),
				"architecture":                    str("Ada Lovelace"),
				"cudaComputeCapability":           ver("8.9.0"),
				"driverVersion":                   ver("560.28.3"),
				"cudaDriverVersion":               ver("12.6.0"),
				"migCapable":                      flag(false),
				"nvlinkGroup":                     num(2),
				"resource.kubernetes.io/pciBusID": str("0000:5e:00.0"),
			},
			capacity: map[resourceapi.QualifiedName]string{"memory": "23034Mi"},
		},
	}

	node := mixedNode()
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := res.Pools["node-a"]
	if !ok || len(res.Pools) != 1 {
		t.Fatalf("want exactly one pool named after the node, got %v", res.Pools)
	}
	if len(pool.Slices) != 2 {
		t.Fatalf("want 2 slices (GPUs, monitors), got %d", len(pool.Slices))
	}
	devices := pool.Slices[0].Devices
	if len(devices) != len(tests) {
		t.Fatalf("want %d devices, got %d", len(tests), len(devices))
	}
	for i, tt := range tests {
		t.Run(tt.device, func(t *testing.T) {
			d := devices[i] // devices are in minor order, like the table
			if d.Name != tt.device {
				t.Fatalf("device %d is %q, want %q", i, d.Name, tt.device)
			}
			if !equality.Semantic.DeepEqual(d.Attributes, tt.attrs) {
				for name, want := range tt.attrs {
					if got, ok := d.Attributes[name]; !ok || !equality.Semantic.DeepEqual(got, want) {
						t.Errorf("attribute %s = %s, want %s", name, attrString(got), attrString(want))
					}
				}
				for name, got := range d.Attributes {
					if _, ok := tt.attrs[name]; !ok {
						t.Errorf("unexpected attribute %s = %s", name, attrString(got))
					}
				}
			}
			if len(d.Capacity) != len(tt.capacity) {
				t.Errorf("capacity %v, want %v", d.Capacity, tt.capacity)
			}
			for name, want := range tt.capacity {
				got, ok := d.Capacity[name]
				if !ok || got.Value.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("capacity %s = %s, want %s", name, got.Value.String(), want)
				}
			}
			if d.Capacity[CapMemory].Value.Format != resource.BinarySI {
				t.Errorf("memory format %s, want BinarySI", d.Capacity[CapMemory].Value.Format)
			}
			if len(d.Taints) != 0 {
				t.Errorf("healthy GPU has taints %v", d.Taints)
			}
		})
	}
}

func attrString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "string " + *a.StringValue
	case a.VersionValue != nil:
		return "version " + *a.VersionValue
	case a.IntValue != nil:
		return "int " + strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		if *a.BoolValue {
			return "bool true"
		}
		return "bool false"
	}
	return "<none>"
}
