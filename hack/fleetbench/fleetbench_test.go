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

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

func TestQuantile(t *testing.T) {
	// 10 observations up to 1, 80 in (1, 2], 10 in (2, 4].
	h := histogram{bounds: []float64{1, 2, 4}, counts: []float64{10, 90, 100}, count: 100}
	tests := []struct{ q, want float64 }{
		{0.05, 0.5},   // inside the first bucket, from 0
		{0.5, 1.5},    // rank 50: 40 of the 80 in (1, 2]
		{0.95, 3},     // rank 95: 5 of the 10 in (2, 4]
		{0.999, 3.98}, // near the top of the last bucket
	}
	for _, tc := range tests {
		if got := h.quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
	before := histogram{bounds: h.bounds, counts: []float64{10, 10, 10}, count: 10}
	// The difference: 80 observations in (1, 2], 10 in (2, 4]; rank 45.
	if got := h.minus(before).quantile(0.5); math.Abs(got-1.5625) > 1e-9 {
		t.Errorf("quantile of the difference = %v, want 1.5625", got)
	}
}

// TestBusyStates: the 90% state takes 90% of the fleet's GPUs, as one free
// GPU on most nodes (spread) or one empty node in ten (packed).
func TestBusyStates(t *testing.T) {
	const nodes = 1000
	for _, packed := range []bool{false, true} {
		taken, empty, oneFree := 0, 0, 0
		for i := range nodes {
			g := busyGPUs(i, packed)
			taken += g
			switch g {
			case 0:
				empty++
			case gpusPerNode - 1:
				oneFree++
			}
		}
		if got := float64(taken) / (nodes * gpusPerNode); got != 0.9 {
			t.Errorf("packed=%v: %.3f of the GPUs taken, want 0.9", packed, got)
		}
		if packed && empty != nodes/10 {
			t.Errorf("packed: %d empty nodes, want %d", empty, nodes/10)
		}
		if !packed && oneFree != nodes*8/10 {
			t.Errorf("spread: %d nodes with one free GPU, want %d", oneFree, nodes*8/10)
		}
	}
}

// TestWorkloadPods: a workload never asks for more than the free GPUs hold
// (half of them, but all the empty nodes of a packed fleet for 8-GPU pods).
func TestWorkloadPods(t *testing.T) {
	for _, w := range workloads {
		if w.gang > 0 {
			continue // gangJobs sizes them (TestGangJobs)
		}
		for _, busy := range []bool{false, true} {
			for _, n := range []int{10, 100, 1000} {
				p := w.pods(n, 1_000_000, busy)
				var gpus float64
				kinds := w.kindsFor(busy)
				for i := range p {
					switch kinds[i%len(kinds)] {
					case kindGPU:
						gpus++
					case kindGPU8:
						gpus += gpusPerNode
					case kindMIG:
						gpus += 1.0 / 7
					}
				}
				free := float64(n * gpusPerNode)
				if busy {
					free /= 10
				}
				if p < 1 || gpus > free+1e-9 {
					t.Errorf("%s busy=%v on %d nodes: %d pods take %.1f GPUs of %.0f free", w.name, busy, n, p, gpus, free)
				}
			}
			if p := w.pods(1000, 7, busy); p != 7 {
				t.Errorf("%s: %d pods with a limit of 7", w.name, p)
			}
		}
	}
}

// h100Pool is an idle DGX H100's pool in the layout; in the gpudra
// layout, spare says whether the node keeps one of the fleet's spares.
func h100Pool(t *testing.T, layout string, spare bool) []resourceslice.Slice {
	t.Helper()
	var pool []resourceslice.Slice
	err := fakenodes.WithNode(context.Background(), "dgx-h100", "node-a", t.TempDir(), func(node gpu.Node, sysfsRoot string) error {
		var err error
		pool, err = nodeSlices(node, sysfsRoot, driverName, layout, spare)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func deviceNames(pool []resourceslice.Slice) []string {
	var out []string
	for _, s := range pool {
		for _, d := range s.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

// TestLayouts: every layout publishes what it says, and the NVIDIA-shaped
// one holds exactly the devices of gpudra's layout with every spare,
// regrouped.
func TestLayouts(t *testing.T) {
	gpudra := h100Pool(t, layoutGpudra, true)
	if first := gpudra[0].Devices; len(first) != 8 || first[0].Name != "gpu-0" {
		t.Errorf("gpudra's first slice: %d devices, want the 8 whole GPUs first", len(first))
	}
	// 8 whole GPUs, the spare's 25 placements, 8 monitors.
	if n := len(deviceNames(gpudra)); n != 41 {
		t.Errorf("gpudra, a node with the fleet's spare: %d devices, want 41", n)
	}
	if n := len(deviceNames(h100Pool(t, layoutNodeSpares, false))); n != 41 {
		t.Errorf("%s: %d devices, want 41 on every node", layoutNodeSpares, n)
	}
	// 8 whole GPUs and 8 monitors, no counter set: what 19 nodes in 20
	// publish, in fleet mode's compact layout (whole GPUs, one empty
	// counter slice, monitors) where the node with the spare has 11.
	without := h100Pool(t, layoutGpudra, false)
	if n := len(deviceNames(without)); n != 16 {
		t.Errorf("gpudra, a node without a spare: %d devices, want 16", n)
	}
	if len(without) != 3 || len(without[1].Devices) != 0 || len(gpudra) != 11 {
		t.Errorf("gpudra: %d slices without a spare (want 3, the second empty), %d with one (want 11)", len(without), len(gpudra))
	}
	for i, s := range without {
		if len(s.SharedCounters) > 0 {
			t.Errorf("gpudra, a node without a spare: slice %d publishes %d counter sets, want none", i, len(s.SharedCounters))
		}
	}
	all := deviceNames(h100Pool(t, layoutAllSpares, false))
	if len(all) != 216 {
		t.Errorf("%s: %d devices, want 216", layoutAllSpares, len(all))
	}

	nv := h100Pool(t, layoutNVIDIA, false)
	if len(nv) != 9 || len(nv[0].SharedCounters) != 8 || len(nv[0].Devices) != 0 {
		t.Fatalf("NVIDIA-shaped: %d slices, the first with %d counter sets and %d devices; want 9, 8 and 0", len(nv), len(nv[0].SharedCounters), len(nv[0].Devices))
	}
	for g, s := range nv[1:] {
		if want := gpu.WholeDeviceName(g); s.Devices[0].Name != want {
			t.Errorf("NVIDIA-shaped slice %d starts with %s, want %s", g+1, s.Devices[0].Name, want)
		}
		for _, d := range s.Devices {
			if name, _ := gpu.ParseDeviceName(d.Name); name.Minor != g {
				t.Errorf("NVIDIA-shaped slice %d holds %s of another GPU", g+1, d.Name)
			}
		}
	}
	got, want := deviceNames(nv), slices.Clone(all)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("NVIDIA-shaped devices differ from gpudra's with every spare")
	}

	// The 8 whole GPUs and the monitoring device of each (gpu-<minor>-monitor,
	// for admin-access monitoring pods).
	if whole := deviceNames(h100Pool(t, layoutWhole, false)); len(whole) != 16 {
		t.Errorf("whole GPUs only: %d devices, want 8 GPUs and 8 monitoring devices", len(whole))
	}
	few := deviceNames(h100Pool(t, layoutFewProfiles, false))
	if len(few) == 0 || len(few) >= len(deviceNames(gpudra)) {
		t.Errorf("%s: %d devices, want fewer than gpudra's", layoutFewProfiles, len(few))
	}

	// gpudra's counter sets: the spare's only; the comparison layout has
	// the same devices and every GPU's.
	sets := func(pool []resourceslice.Slice) (n int) {
		for _, s := range pool {
			n += len(s.SharedCounters)
		}
		return n
	}
	every := h100Pool(t, layoutEveryCounterSet, false)
	if sets(gpudra) != 1 || sets(every) != 8 || !slices.Equal(deviceNames(every), deviceNames(gpudra)) || len(every) != len(gpudra) {
		t.Errorf("counter sets: gpudra %d (want 1), %s %d (want 8, with gpudra's devices and slices)", sets(gpudra), layoutEveryCounterSet, sets(every))
	}
}

// TestSliceNamesKeepOrder: the API server appends a random suffix to the
// generated name; sorted by name, the slices must stay in layout order,
// past ten slices too.
func TestSliceNamesKeepOrder(t *testing.T) {
	pool := make([]resourceslice.Slice, 17)
	objs := sliceObjects(driverName, "node-a", pool)
	var names []string
	for i, o := range objs {
		names = append(names, o.GenerateName+strings.Repeat("z", i%3)) // any suffix
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("names out of layout order: %v", names)
	}
}

func TestReplaceGenerated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := replaceGenerated(path, "first\n"); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	handWritten := "# Performance\n\nWritten by hand.\n\n" + strings.TrimPrefix(string(page), "# Performance\n\n") + "\nAfterwards, by hand.\n"
	if err := os.WriteFile(path, []byte(handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceGenerated(path, "second\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# Performance\n\nWritten by hand.\n\n" + beginMarker + "\nsecond\n" + endMarker + "\n\nAfterwards, by hand.\n"
	if string(got) != want {
		t.Errorf("page after the second report:\n%s\nwant:\n%s", got, want)
	}
}

// TestHideBusyIsTheBuilders: taking the placements of GPUs held whole out
// of gpudra's slices, as the benchmark does when it fills the fleet
// (busySlices), gives exactly the slices gpudra's slice builder builds for
// those GPUs in use; in the gpudra layout a node whose every GPU is taken
// whole, its spare with them, publishes the compact layout.
func TestHideBusyIsTheBuilders(t *testing.T) {
	for _, tc := range []struct {
		layout string
		busy   int
	}{{layoutGpudra, 7}, {layoutGpudra, 8}, {layoutNodeSpares, 7}, {layoutNodeSpares, 8}, {layoutAllSpares, 7}, {layoutAllSpares, 8}} {
		busy := tc.busy
		err := fakenodes.WithNode(context.Background(), "dgx-h100", "node-a", t.TempDir(), func(node gpu.Node, sysfsRoot string) error {
			full, err := nodeSlices(node, sysfsRoot, driverName, tc.layout, true)
			if err != nil {
				return err
			}
			inUse := map[string]gpu.Use{}
			for _, g := range node.GPUs {
				if g.Minor < busy {
					inUse[g.UUID] = gpu.UsedWhole
				}
			}
			opts, err := layoutOptions(driverName, sysfsRoot, tc.layout, true)
			if err != nil {
				return err
			}
			idle, err := slicebuilder.Plan(node, opts)
			if err != nil {
				return err
			}
			opts.InUse, opts.MigReady = inUse, idle.MigReady
			res, err := slicebuilder.Build(node, opts)
			if err != nil {
				return err
			}
			want := res.Pools[node.Name].Slices
			got, err := busySlices(tc.layout, full, busy, func() ([]resourceslice.Slice, error) {
				return nodeSlices(node, sysfsRoot, driverName, tc.layout, false)
			})
			if err != nil {
				return err
			}
			if len(want) != len(got) {
				t.Fatalf("%s, %d busy: the builder makes %d slices, the benchmark %d", tc.layout, busy, len(want), len(got))
			}
			if wantSlices := map[bool]int{false: 11, true: 3}[tc.layout == layoutGpudra && busy == 8]; len(got) != wantSlices {
				t.Errorf("%s, %d busy: %d slices, want %d", tc.layout, busy, len(got), wantSlices)
			}
			for i := range got {
				if !reflect.DeepEqual(deviceNames(got[i:i+1]), deviceNames(want[i:i+1])) {
					t.Errorf("%s, %d busy, slice %d: the benchmark publishes %v, the builder %v", tc.layout, busy, i,
						deviceNames(got[i:i+1]), deviceNames(want[i:i+1]))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFleetSpareNodes: in every fleet state, one node in twenty keeps the
// fleet's spare, as gpudra-controller's default budget (5%) does, and
// each of them has a free GPU to keep it on.
func TestFleetSpareNodes(t *testing.T) {
	const nodes = 1000
	for _, st := range []struct {
		name         string
		busy, packed bool
	}{{"empty", false, false}, {"90%", true, false}, {"90% packed", true, true}} {
		spares := 0
		for i := range nodes {
			if !fleetSpareNode(i, st.busy, st.packed) {
				continue
			}
			spares++
			if st.busy && busyGPUs(i, st.packed) >= gpusPerNode {
				t.Errorf("%s: node %d keeps the spare but has no free GPU", st.name, i)
			}
		}
		if spares != nodes/fleetSpareEvery {
			t.Errorf("%s: %d nodes keep a spare, want %d", st.name, spares, nodes/fleetSpareEvery)
		}
	}
}
