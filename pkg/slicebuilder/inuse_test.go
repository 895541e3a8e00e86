package slicebuilder

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// TestInUse: a GPU held whole publishes no placements and one whose
// partitions are held publishes no whole device; every other slice stays
// exactly as it was, so each change is one slice write and no new pool
// generation.
func TestInUse(t *testing.T) {
	node := h100Node("node-a", 8)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	build := func(inUse map[string]gpu.Use) [][]string {
		t.Helper()
		res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, InUse: inUse})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]string
		for _, s := range res.Pools["node-a"].Slices {
			var names []string
			for _, d := range s.Devices {
				names = append(names, d.Name)
			}
			for _, c := range s.SharedCounters {
				names = append(names, "counters:"+c.Name)
			}
			out = append(out, names)
		}
		return out
	}
	all := build(nil)
	if len(all) < 4 {
		t.Fatalf("%d slices; the test needs the placements in more than one slice", len(all))
	}

	tests := []struct {
		name        string
		inUse       map[string]gpu.Use
		gone        []string // name prefixes no longer published
		kept        []string
		changedSets int
	}{
		{name: "nothing held", inUse: map[string]gpu.Use{node.GPUs[2].UUID: gpu.Unused}},
		{
			name:        "GPU 3 held whole",
			inUse:       map[string]gpu.Use{node.GPUs[3].UUID: gpu.UsedWhole},
			gone:        []string{"gpu-3-mig-"},
			kept:        []string{"gpu-3", "counters:gpu-3-counters", "gpu-2-mig-1g10gb-0", "gpu-4-mig-1g10gb-0"},
			changedSets: 1,
		},
		{
			name:        "partitions of GPU 5 held",
			inUse:       map[string]gpu.Use{node.GPUs[5].UUID: gpu.UsedByMIG},
			gone:        []string{"gpu-5"},
			kept:        []string{"gpu-5-mig-1g10gb-0", "counters:gpu-5-counters", "gpu-4", "gpu-6"},
			changedSets: 1,
		},
		{
			name:        "both",
			inUse:       map[string]gpu.Use{node.GPUs[3].UUID: gpu.UsedWhole, node.GPUs[5].UUID: gpu.UsedByMIG},
			gone:        []string{"gpu-3-mig-", "gpu-5"},
			kept:        []string{"gpu-3", "gpu-5-mig-3g40gb-4"},
			changedSets: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := build(tc.inUse)
			if len(got) != len(all) {
				t.Fatalf("%d slices, want %d as with nothing held", len(got), len(all))
			}
			published := map[string]bool{}
			changed := 0
			for i := range got {
				for _, n := range got[i] {
					published[n] = true
				}
				if !reflect.DeepEqual(got[i], all[i]) {
					changed++
				}
			}
			if changed != tc.changedSets {
				t.Errorf("%d slices changed, want %d", changed, tc.changedSets)
			}
			for n := range published {
				for _, g := range tc.gone {
					if n == g || (strings.HasSuffix(g, "-") && strings.HasPrefix(n, g)) {
						t.Errorf("%s is published", n)
					}
				}
			}
			for _, k := range tc.kept {
				if !published[k] {
					t.Errorf("%s is not published", k)
				}
			}
		})
	}
}
