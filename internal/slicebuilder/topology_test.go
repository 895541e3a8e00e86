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
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestTopologyAttributes(t *testing.T) {
	const bus = "0000:1b:00.0"
	tests := []struct {
		name      string
		busID     string
		sysfs     []fakePCIDevice // nil: an empty host root, no sys/ at all
		wantRoot  string          // "" means omitted
		wantNUMA  *int64          // nil means omitted
		wantBusID bool
		wantErr   string
	}{
		{
			name:      "no sysfs: only the bus ID",
			busID:     bus,
			wantBusID: true,
		},
		{
			name:      "sysfs present: pcieRoot and NUMA node",
			busID:     bus,
			sysfs:     []fakePCIDevice{{busID: bus, pcieRoot: "pci0000:16", numaNode: 1}},
			wantBusID: true,
			wantRoot:  "pci0000:16",
			wantNUMA:  ptrTo[int64](1),
		},
		{
			name:      "no NUMA affinity (-1): NUMA omitted, pcieRoot kept",
			busID:     bus,
			sysfs:     []fakePCIDevice{{busID: bus, pcieRoot: "pci0000:00", numaNode: -1}},
			wantBusID: true,
			wantRoot:  "pci0000:00",
		},
		{
			name:      "sysfs without this device: both omitted",
			busID:     bus,
			sysfs:     []fakePCIDevice{{busID: "0000:9a:00.0", pcieRoot: "pci0000:80", numaNode: 1}},
			wantBusID: true,
		},
		{
			name:  "no bus ID: nothing",
			busID: "",
			sysfs: []fakePCIDevice{{busID: bus, pcieRoot: "pci0000:16", numaNode: 1}},
		},
		{
			name:    "malformed bus ID (NVML's raw 8-digit domain) is an error",
			busID:   "00000000:1B:00.0",
			wantErr: "PCI bus ID",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeSysfs(t, tt.sysfs)
			node := h100Node("node-a", 1)
			node.GPUs[0].PCIBusID = tt.busID
			res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: root})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Build error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			attrs := res.Pools["node-a"].Slices[0].Devices[0].Attributes

			got, ok := attrs[AttrPCIBusID]
			if ok != tt.wantBusID || (ok && *got.StringValue != tt.busID) {
				t.Errorf("pciBusID = %s (present %v), want present %v", attrString(got), ok, tt.wantBusID)
			}
			got, ok = attrs[AttrPCIeRoot]
			if tt.wantRoot == "" && ok {
				t.Errorf("pcieRoot = %s, want it omitted", attrString(got))
			}
			if tt.wantRoot != "" && (!ok || got.StringValue == nil || *got.StringValue != tt.wantRoot) {
				t.Errorf("pcieRoot = %s, want %s", attrString(got), tt.wantRoot)
			}
			got, ok = attrs[AttrNUMANode]
			if tt.wantNUMA == nil && ok {
				t.Errorf("numaNode = %s, want it omitted", attrString(got))
			}
			if tt.wantNUMA != nil && (!ok || got.IntValue == nil || *got.IntValue != *tt.wantNUMA) {
				t.Errorf("numaNode = %s, want int %d", attrString(got), *tt.wantNUMA)
			}
			if tt.wantBusID && tt.wantRoot != "" && tt.wantNUMA != nil && len(attrs) != wholeGPUAttributes-nvlinkDomainAttributes {
				t.Errorf("%d attributes with full topology outside an NVLink domain, wholeGPUAttributes says %d", len(attrs), wholeGPUAttributes-nvlinkDomainAttributes)
			}
		})
	}
}

// TestTopologyUsesHostRoot pins the meaning of Options.SysfsRoot: it is the
// host root that backend.Backend.SysfsRoot returns (sysfs is below it, in
// sys/), not the sysfs mount itself.
func TestTopologyUsesHostRoot(t *testing.T) {
	const bus = "0000:1b:00.0"
	root := fakeSysfs(t, []fakePCIDevice{{busID: bus, pcieRoot: "pci0000:16", numaNode: 0}})
	node := gpu.Node{Name: "n", DriverVersion: "550.54.15", CUDADriverVersion: "12.4", GPUs: []gpu.GPU{h100(0, 0, 0, bus)}}

	for _, tt := range []struct {
		root string
		want bool
	}{{root, true}, {root + "/sys", false}} {
		res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: tt.root})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := res.Pools["n"].Slices[0].Devices[0].Attributes[AttrPCIeRoot]
		if ok != tt.want {
			t.Errorf("SysfsRoot %q: pcieRoot present %v, want %v", tt.root, ok, tt.want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
