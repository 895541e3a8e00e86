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

	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

// migH100Node is an n-GPU H100 node whose GPUs can all partition.
func migH100Node(n int) gpu.Node {
	node := h100Node("node-a", n)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	return node
}

// sliceShapes is each slice's number of devices and of counter sets.
func sliceShapes(p resourceslice.Pool) string {
	var out []string
	for _, s := range p.Slices {
		out = append(out, fmt.Sprintf("%d/%d", len(s.Devices), len(s.SharedCounters)))
	}
	return fmt.Sprint(out)
}

// TestFleetCompactLayout: in fleet mode a node none of whose GPUs
// publishes placements publishes its whole GPUs, one empty counter slice
// and its monitors (layout.go); as soon as one GPU publishes, the fixed
// layout is back. The other modes keep the fixed layout whatever is
// published.
func TestFleetCompactLayout(t *testing.T) {
	node := migH100Node(8)
	allWhole := map[string]gpu.Use{}
	for _, g := range node.GPUs {
		allWhole[g.UUID] = gpu.UsedWhole
	}
	const (
		compact = "[8/0 0/0 8/0]"
		// whole GPUs, the counter slice (GPU 7's set), GPU 7's 16
		// placements (h100MIG), the other seven GPUs' empty partition slices,
		// monitors
		oneSpare = "[8/0 0/1 16/0 0/0 0/0 0/0 0/0 0/0 0/0 0/0 8/0]"
		fixed    = "[8/0 0/0 0/0 0/0 0/0 0/0 0/0 0/0 0/0 0/0 8/0]"
	)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"fleet, none assigned", Options{SpareGPUs: FleetAssigned(0)}, compact},
		{"fleet, one assigned", Options{SpareGPUs: FleetAssigned(1)}, oneSpare},
		{"fleet, none assigned, one sticky", Options{SpareGPUs: FleetAssigned(0), MigReady: map[string]bool{node.GPUs[7].UUID: true}}, oneSpare},
		{"fleet, none assigned, one partitioned", Options{SpareGPUs: FleetAssigned(0), InUse: map[string]gpu.Use{node.GPUs[7].UUID: gpu.UsedByMIG}}, oneSpare},
		{"fleet, one assigned, all taken whole", Options{SpareGPUs: FleetAssigned(1), InUse: allWhole}, compact},
		{"fleet, admin instances", Options{SpareGPUs: FleetAssigned(0), AdminInstances: map[string][]gpu.MigInstance{
			node.GPUs[7].UUID: {{GIID: 1, ProfileID: 19, Placement: gpu.MigPlacement{Start: 0, Size: 1}}},
		}}, "[7/0 0/1 13/0 0/0 0/0 0/0 0/0 0/0 0/0 0/0 8/0]"},
		{"fleet, whole GPUs only", Options{SpareGPUs: FleetAssigned(0), WholeGPUsOnly: true}, "[8/0 8/0]"},
		{"numeric, all taken whole", Options{SpareGPUs: SpareGPUs{N: 1}, InUse: allWhole}, fixed},
		{"all, all taken whole", Options{SpareGPUs: SpareGPUs{All: true}, InUse: allWhole}, fixed},
		{"numeric", Options{}, oneSpare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.DriverName, tt.opts.SysfsRoot = testDriver, noSysfs
			p, err := Plan(node, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := sliceShapes(p.Resources.Pools["node-a"]); got != tt.want {
				t.Errorf("slices (devices/counter sets) %s, want %s", got, tt.want)
			}
		})
	}
}

// TestFleetCompactKeepsTheWholeGPUs: the whole GPUs' slice is slice 0 in
// both layouts, with the same devices where no GPU publishes placements
// (none consumes counters), and the monitors are last.
func TestFleetCompactKeepsTheWholeGPUs(t *testing.T) {
	node := migH100Node(8)
	allWhole := map[string]gpu.Use{}
	for _, g := range node.GPUs {
		allWhole[g.UUID] = gpu.UsedWhole
	}
	build := func(opts Options) resourceslice.Pool {
		t.Helper()
		opts.DriverName, opts.SysfsRoot = testDriver, noSysfs
		p, err := Plan(node, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p.Resources.Pools["node-a"]
	}
	compact := build(Options{SpareGPUs: FleetAssigned(0), InUse: allWhole})
	fixed := build(Options{SpareGPUs: SpareGPUs{N: 1}, InUse: allWhole})
	if !SliceEqual(compact.Slices[0], fixed.Slices[0]) {
		t.Errorf("the whole GPUs' slice differs between the compact and the fixed layout")
	}
	if last := len(compact.Slices) - 1; !SliceEqual(compact.Slices[last], fixed.Slices[len(fixed.Slices)-1]) {
		t.Errorf("the monitors' slice differs between the compact and the fixed layout")
	}
	for _, d := range compact.Slices[0].Devices {
		if len(d.ConsumesCounters) > 0 {
			t.Errorf("compact layout: %s consumes counters no slice publishes", d.Name)
		}
	}
}

// TestFleetCompactSteps: within the compact layout a change is one slice
// (a sick GPU), handed over in one step; going to the fixed layout and
// back is the whole wanted pool at once (a new generation: the number of
// slices differs); within the fixed layout the steps are one slice each
// as always.
func TestFleetCompactSteps(t *testing.T) {
	node := migH100Node(8)
	var ready map[string]bool
	plan := func(assigned int, inUse map[string]gpu.Use, health map[string]gpu.Health) resourceslice.Pool {
		t.Helper()
		p, err := Plan(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, SpareGPUs: FleetAssigned(assigned),
			InUse: inUse, Health: health, MigReady: ready})
		if err != nil {
			t.Fatal(err)
		}
		ready = p.MigReady
		return p.Resources.Pools["node-a"]
	}
	// steps counts NextStep's steps from held to wanted; whole says the
	// first was the wanted pool itself, of another size.
	steps := func(held, wanted resourceslice.Pool) (n int, whole bool) {
		for {
			next, done := NextStep(&held, wanted)
			if done {
				return n, whole
			}
			if n == 0 && len(next.Slices) != len(held.Slices) {
				whole = true
			}
			n++
			held = next
		}
	}
	sick := map[string]gpu.Health{node.GPUs[2].UUID: gpu.Unhealthy}
	seven := map[string]gpu.Use{node.GPUs[7].UUID: gpu.UsedWhole}
	held := plan(0, nil, nil)
	for _, c := range []struct {
		name     string
		assigned int
		inUse    map[string]gpu.Use
		health   map[string]gpu.Health
		slices   int
		steps    int
		newGen   bool
	}{
		{"a GPU turns unhealthy", 0, nil, sick, 3, 1, false},
		{"the controller assigns a spare", 1, nil, sick, 11, 1, true},
		// the spare's placements hidden, its whole GPU's counters
		// dropped, GPU 6's counter set added (GPU 7's kept), GPU 6's
		// whole device consumes it, GPU 6's placements, GPU 7's set
		// dropped
		{"the spare taken whole", 1, seven, sick, 11, 5, false},
		{"the assignment removed: the published GPU stays", 0, seven, sick, 11, 0, false},
		{"the last published GPU taken whole", 0, map[string]gpu.Use{node.GPUs[7].UUID: gpu.UsedWhole, node.GPUs[6].UUID: gpu.UsedWhole}, sick, 3, 1, true},
		// nothing changes: a whole GPU is the same device in use or not
		{"all freed", 0, nil, sick, 3, 0, false},
	} {
		wanted := plan(c.assigned, c.inUse, c.health)
		if len(wanted.Slices) != c.slices {
			t.Errorf("%s: %d slices, want %d", c.name, len(wanted.Slices), c.slices)
		}
		n, whole := steps(held, wanted)
		if n != c.steps || whole != c.newGen {
			t.Errorf("%s: %d steps (the whole pool at once: %v), want %d (%v)", c.name, n, whole, c.steps, c.newGen)
		}
		held = wanted
	}
}
