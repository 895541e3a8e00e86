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
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestReadyGPUs(t *testing.T) {
	// free, healthy GPUs 0..7 by default
	gpus := func(mod func(i int, c *migCandidate)) []migCandidate {
		var out []migCandidate
		for i := range 8 {
			c := migCandidate{uuid: fmt.Sprint(i), healthy: true}
			if mod != nil {
				mod(i, &c)
			}
			out = append(out, c)
		}
		return out
	}
	tests := []struct {
		name  string
		cands []migCandidate
		spare SpareGPUs
		want  string
	}{
		{"fresh node: the highest minor is the spare", gpus(nil), SpareGPUs{}, "7"},
		{"two spares", gpus(nil), SpareGPUs{N: 2}, "6 7"},
		{"all", gpus(nil), SpareGPUs{All: true}, "0 1 2 3 4 5 6 7"},
		{"more spares than GPUs", gpus(nil), SpareGPUs{N: 20}, "0 1 2 3 4 5 6 7"},
		{"fleet: none assigned to this node", gpus(nil), FleetAssigned(0), ""},
		{"fleet: one assigned", gpus(nil), FleetAssigned(1), "7"},
		{"fleet: none assigned, a partitioned GPU still publishes", gpus(func(i int, c *migCandidate) {
			if i == 3 {
				c.use, c.wasReady = gpu.UsedByMIG, true
			}
		}), FleetAssigned(0), "3"},
		{"fleet: assignment withdrawn, the published spare stays", gpus(func(i int, c *migCandidate) {
			if i == 7 {
				c.wasReady = true
			}
		}), FleetAssigned(0), "7"},
		{"a partitioned GPU and the next spare", gpus(func(i int, c *migCandidate) {
			if i == 7 {
				c.use, c.wasReady = gpu.UsedByMIG, true
			}
		}), SpareGPUs{}, "6 7"},
		{"the spare taken whole: the next one", gpus(func(i int, c *migCandidate) {
			if i == 7 {
				c.use, c.wasReady = gpu.UsedWhole, true
			}
		}), SpareGPUs{}, "6"},
		{"whole claims take GPUs whose placements are hidden anyway", gpus(func(i int, c *migCandidate) {
			if i < 4 {
				c.use = gpu.UsedWhole
			}
			c.wasReady = i == 7
		}), SpareGPUs{}, "7"},
		{"placements once published stay while the GPU is free", gpus(func(i int, c *migCandidate) {
			c.wasReady = i >= 5
		}), SpareGPUs{}, "5 6 7"},
		{"an unhealthy spare stays published but is not counted", gpus(func(i int, c *migCandidate) {
			c.wasReady = i == 7
			c.healthy = i != 7
		}), SpareGPUs{}, "6 7"},
		{"an unhealthy GPU is never made a spare", gpus(func(i int, c *migCandidate) {
			c.healthy = i != 7
		}), SpareGPUs{}, "6"},
		{"an admin's instances: published, not a spare", gpus(func(i int, c *migCandidate) {
			if i == 7 {
				c.admin, c.onlyMIG = true, true
			}
		}), SpareGPUs{}, "6 7"},
		{"MIG mode on that needs a reset to turn off: published, a spare while free", gpus(func(i int, c *migCandidate) {
			c.onlyMIG = i == 2
		}), SpareGPUs{}, "2"},
		{"every GPU held whole", gpus(func(i int, c *migCandidate) { c.use = gpu.UsedWhole }), SpareGPUs{}, ""},
		{"every GPU partitioned", gpus(func(i int, c *migCandidate) { c.use = gpu.UsedByMIG }), SpareGPUs{}, "0 1 2 3 4 5 6 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readyGPUs(tc.cands, tc.spare)
			var names []string
			for uuid := range got {
				names = append(names, uuid)
			}
			slices.Sort(names)
			if s := strings.Join(names, " "); s != tc.want {
				t.Errorf("ready %q, want %q", s, tc.want)
			}
		})
	}
}

func TestParseSpareGPUs(t *testing.T) {
	for in, want := range map[string]string{"all": "all", "fleet": "fleet", "1": "1", " 3 ": "3"} {
		got, err := ParseSpareGPUs(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseSpareGPUs(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "some", ""} {
		if _, err := ParseSpareGPUs(in); err == nil {
			t.Errorf("ParseSpareGPUs(%q) accepted", in)
		}
	}
	if (SpareGPUs{}).String() != fmt.Sprint(DefaultSpareGPUs) {
		t.Errorf("the zero value is %s, want the default %d", SpareGPUs{}, DefaultSpareGPUs)
	}
}

// TestPlanChanges walks one 8-GPU node through the changes a node sees
// and checks, for each, which slices change: the number of slices never
// does (so the ResourceSlice controller never starts a new pool
// generation); taking or freeing a GPU whose placements are not published
// changes nothing; a GPU that starts or stops publishing its placements
// changes its partition slice, the whole GPUs' (its whole device consumes
// its counters exactly while its placements are published) and the
// counter sets' (its set is published exactly then too). The
// plugin hands such changes to the controller one slice at a time, in a
// safe order (TestNextStepOrder).
func TestPlanChanges(t *testing.T) {
	node := h100Node("node-a", 8)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	uuid := func(i int) string { return node.GPUs[i].UUID }
	var ready map[string]bool
	var prev []resourceslice.Slice
	plan := func(inUse map[string]gpu.Use, health map[string]gpu.Health) []resourceslice.Slice {
		t.Helper()
		p, err := Plan(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, InUse: inUse, Health: health, MigReady: ready})
		if err != nil {
			t.Fatal(err)
		}
		ready = p.MigReady
		return p.Resources.Pools["node-a"].Slices
	}
	// Slices: 0 whole GPUs, 1 counters, 2-9 placements of GPU 7 down to
	// 0, 10 monitors.
	partitionSlice := func(minor int) int { return 2 + 7 - minor }
	prev = plan(nil, nil)
	steps := []struct {
		name    string
		inUse   map[string]gpu.Use
		health  map[string]gpu.Health
		changed []int
	}{
		{"a whole GPU taken", map[string]gpu.Use{uuid(0): gpu.UsedWhole}, nil, nil},
		{"the spare partitioned: GPU 6 becomes the next spare (its counter set, which its whole GPU consumes)", map[string]gpu.Use{uuid(0): gpu.UsedWhole, uuid(7): gpu.UsedByMIG}, nil, []int{0, 1, partitionSlice(6)}},
		{"the partitions freed: GPU 7 stays published", map[string]gpu.Use{uuid(0): gpu.UsedWhole}, nil, nil},
		{"the whole GPU freed", nil, nil, nil},
		{"a spare taken whole: hidden, its whole GPU consumes nothing, no counter set", map[string]gpu.Use{uuid(6): gpu.UsedWhole}, nil, []int{0, 1, partitionSlice(6)}},
		{"GPU 6 freed: GPU 7 is still a spare", nil, nil, nil},
		{"a GPU whose placements are hidden turns unhealthy", nil, map[string]gpu.Health{uuid(2): gpu.Unhealthy}, []int{0}},
		{"the spare turns unhealthy: tainted, and GPU 6 the next spare", nil, map[string]gpu.Health{uuid(2): gpu.Unhealthy, uuid(7): gpu.Unhealthy}, []int{0, 1, partitionSlice(7), partitionSlice(6)}},
	}
	for _, st := range steps {
		got := plan(st.inUse, st.health)
		if len(got) != len(prev) {
			t.Fatalf("%s: %d slices, was %d", st.name, len(got), len(prev))
		}
		var changed []int
		for i := range got {
			if !devicesEqual(got[i].Devices, prev[i].Devices) || !equality.Semantic.DeepEqual(got[i].SharedCounters, prev[i].SharedCounters) {
				changed = append(changed, i)
			}
		}
		if fmt.Sprint(changed) != fmt.Sprint(st.changed) {
			t.Errorf("%s: slices %v changed, want %v", st.name, changed, st.changed)
		}
		prev = got
	}
}

// TestNextStepOrder: the steps towards a pool keep every intermediate pool
// safe and valid. A GPU made a spare has its counter set published before
// its whole device consumes it, and consumes before its placements appear;
// a GPU taken whole loses its placements before its whole device stops
// consuming, and its counter set after. (internal/simulate asks the real
// allocator the same at every step: TestSpareTakenWholeAndFreed.)
func TestNextStepOrder(t *testing.T) {
	node := h100Node("node-a", 8)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	uuid := func(i int) string { return node.GPUs[i].UUID }
	plan := func(inUse map[string]gpu.Use, ready map[string]bool) (resourceslice.Pool, map[string]bool) {
		t.Helper()
		p, err := Plan(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, InUse: inUse, MigReady: ready})
		if err != nil {
			t.Fatal(err)
		}
		return p.Resources.Pools["node-a"], p.MigReady
	}
	idle, ready := plan(nil, nil)
	// The spare (GPU 7) taken whole: GPU 6 becomes the spare.
	wanted, _ := plan(map[string]gpu.Use{uuid(7): gpu.UsedWhole}, ready)
	const whole, counters, gpu7, gpu6 = 0, 1, 2, 3
	var order []int
	for cur := idle; ; {
		next, done := NextStep(&cur, wanted)
		if done {
			break
		}
		for i := range next.Slices {
			if !SliceEqual(next.Slices[i], cur.Slices[i]) {
				order = append(order, i)
			}
		}
		// Valid: every counter set consumed is published.
		sets := map[string]bool{}
		for _, s := range next.Slices {
			for _, cs := range s.SharedCounters {
				sets[cs.Name] = true
			}
		}
		for _, s := range next.Slices {
			for _, d := range s.Devices {
				for _, cc := range d.ConsumesCounters {
					if !sets[cc.CounterSet] {
						t.Errorf("after steps %v, %s consumes counter set %s, which is not published", order, d.Name, cc.CounterSet)
					}
				}
			}
		}
		// Safe: every published placement's GPU consumes its counters.
		consumes := map[string]bool{}
		for _, d := range next.Slices[whole].Devices {
			if len(d.ConsumesCounters) > 0 {
				consumes[d.Name] = true
			}
		}
		for _, s := range next.Slices {
			for _, d := range s.Devices {
				if n, _ := gpu.ParseDeviceName(d.Name); n.MIG && !consumes[gpu.WholeDeviceName(n.Minor)] {
					t.Errorf("after steps %v, %s is published while its whole GPU consumes no counters", order, d.Name)
				}
			}
		}
		cur = next
		if len(order) > 10 {
			t.Fatal("no end of steps")
		}
	}
	if want := []int{gpu7, counters, whole, gpu6, counters}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("slices changed in order %v, want %v: GPU 7's placements hidden, GPU 6's counter set added (GPU 7's kept), the whole GPUs' counters, GPU 6's placements, GPU 7's counter set dropped", order, want)
	}
}
