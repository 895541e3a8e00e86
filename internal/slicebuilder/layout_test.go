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
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestChunking(t *testing.T) {
	tests := []struct {
		gpus      int
		wantSizes []int
	}{
		// Whole GPUs, then their monitoring devices, each cut at 64.
		{gpus: 0, wantSizes: []int{0}}, // an empty slice says "driver up, no GPUs"
		{gpus: 1, wantSizes: []int{1, 1}},
		{gpus: 8, wantSizes: []int{8, 8}},
		{gpus: 64, wantSizes: []int{64, 64}},
		{gpus: 65, wantSizes: []int{64, 1, 64, 1}},
		{gpus: 200, wantSizes: []int{64, 64, 64, 8, 64, 64, 64, 8}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d GPUs", tt.gpus), func(t *testing.T) {
			res, err := Build(h100Node("node-a", tt.gpus), Options{DriverName: testDriver, SysfsRoot: noSysfs})
			if err != nil {
				t.Fatal(err)
			}
			slices := res.Pools["node-a"].Slices
			if len(slices) != len(tt.wantSizes) {
				t.Fatalf("%d slices, want %d", len(slices), len(tt.wantSizes))
			}
			next := 0
			for i, s := range slices {
				if len(s.Devices) != tt.wantSizes[i] {
					t.Errorf("slice %d: %d devices, want %d", i, len(s.Devices), tt.wantSizes[i])
				}
				if len(s.Devices) > resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures {
					t.Errorf("slice %d: %d devices, over the limit", i, len(s.Devices))
				}
				for _, d := range s.Devices {
					// The GPUs in minor order, then their monitors.
					want := gpu.WholeDeviceName(next)
					if next >= tt.gpus {
						want = gpu.MonitorDeviceName(next - tt.gpus)
					}
					if d.Name != want {
						t.Fatalf("slice %d: device %q where %q belongs", i, d.Name, want)
					}
					next++
				}
			}
			if next != 2*tt.gpus {
				t.Errorf("%d devices published, want %d GPUs and their monitors", next, tt.gpus)
			}
		})
	}
}

// TestHealthDoesNotRechunk is why the chunk size is always the smaller
// limit: a taint on one GPU must change one slice, not move the boundaries
// of all of them.
func TestHealthDoesNotRechunk(t *testing.T) {
	node := h100Node("node-a", 200)
	healthy, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	sick, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, Health: map[string]gpu.Health{node.GPUs[70].UUID: gpu.Unhealthy}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := healthy.Pools["node-a"].Slices, sick.Pools["node-a"].Slices
	if len(a) != len(b) {
		t.Fatalf("%d slices healthy, %d with one unhealthy GPU", len(a), len(b))
	}
	changed := 0
	for i := range a {
		if !devicesEqual(a[i].Devices, b[i].Devices) {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("one unhealthy GPU changed %d slices, want 1", changed)
	}
}

// TestLayoutOrder pins the section order: whole GPUs, then counter sets
// (the places of at most 8 GPUs per slice, a GPU's set there only while
// it publishes its placements; no devices), then each GPU's partitions in a slice
// of its own (empty while hidden: the number of slices never changes),
// then the monitors.
func TestLayoutOrder(t *testing.T) {
	dev := func(name string) resourceapi.Device { return resourceapi.Device{Name: name} }
	var layout poolLayout
	for i := range 70 {
		layout.wholeGPUs = append(layout.wholeGPUs, dev(fmt.Sprintf("gpu-%d", i)))
	}
	for i := range 9 {
		layout.counterSets = append(layout.counterSets, counterSlot{set: resourceapi.CounterSet{Name: fmt.Sprintf("gpu-%d-counters", i)}, published: i != 3})
	}
	var many []resourceapi.Device
	for i := range 70 {
		many = append(many, dev(fmt.Sprintf("gpu-1-mig-x-%d", i)))
	}
	layout.partitions = []gpuPartitions{
		{uuid: "GPU-1", count: len(many), devices: many},
		{uuid: "GPU-0", count: 1}, // not published: an empty slice
	}
	layout.monitors = []resourceapi.Device{dev("gpu-0-monitor")}

	type shape struct{ devices, counterSets int }
	want := []shape{{64, 0}, {6, 0}, {0, 7}, {0, 1}, {64, 0}, {6, 0}, {0, 0}, {1, 0}}
	got := layout.pool().Slices
	if len(got) != len(want) {
		t.Fatalf("%d slices, want %d", len(got), len(want))
	}
	for i, s := range got {
		if g := (shape{len(s.Devices), len(s.SharedCounters)}); g != want[i] {
			t.Errorf("slice %d: %+v, want %+v", i, g, want[i])
		}
	}
	if got[0].Devices[0].Name != "gpu-0" || got[4].Devices[0].Name != "gpu-1-mig-x-0" || got[7].Devices[0].Name != "gpu-0-monitor" {
		t.Errorf("whole GPUs must come first, partitions after the counters, monitors last")
	}
}

func TestChunk(t *testing.T) {
	got := chunk([]int{1, 2, 3, 4, 5}, 2)
	if fmt.Sprint(got) != "[[1 2] [3 4] [5]]" {
		t.Errorf("chunk = %v", got)
	}
	// Appending to a chunk must not overwrite the next one.
	got[0] = append(got[0], 99)
	if got[1][0] != 3 {
		t.Errorf("chunks share capacity: %v", got)
	}
	if chunk([]int(nil), 2) != nil {
		t.Errorf("chunk(nil) should be nil")
	}
}
