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

package simulate

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The allocator's per-Filter pool rebuild (upstream's share of the cost;
// docs/performance.md, "Upstream's share").
//
// The scheduler's DRA plugin calls the allocator's Allocate once per node
// it tries, for every pod. Allocate (k8s.io/dynamic-resource-allocation
// v0.37.2, structured/internal/incubating) starts with GatherPools, which
// for every slice of the node converts the v1 ResourceSlice into the
// allocator's internal type (every device's name interned, its counter
// consumption copied), sorts the slices, checks that device names are
// unique and that every counter a device consumes exists, and, on the first
// device that consumes counters, sums the counters consumed by every
// allocated device of the pool. None of it depends on the pod: it depends
// on the node's slices (their resourceVersions) and on what is allocated,
// and is rebuilt on every call. Only then does the CEL search run, over
// the devices in slice order until the claim is satisfied.
//
// BenchmarkPoolRebuild measures, per layout, a whole Filter call (Allocate
// of one whole-GPU claim on an idle DGX H100 node) and what the rebuild
// alone costs (the same conversion and checks, done here with the public
// conversion functions the allocator calls), so the difference is what a
// cache of the converted pool, keyed by node, pool generation and slice
// resourceVersions, would save per call.
//
//	go test ./internal/simulate -run '^$' -bench BenchmarkPoolRebuild -benchmem

// rebuildPool does what GatherPools and the first counter check do with
// one node's slices before any CEL evaluation.
func rebuildPool(slices []*resourceapi.ResourceSlice) (int, error) {
	converted := make([]*draapi.ResourceSlice, 0, len(slices))
	for _, s := range slices {
		var out draapi.ResourceSlice
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(s, &out, nil); err != nil {
			return 0, err
		}
		converted = append(converted, &out)
	}
	names := sets.New[draapi.UniqueString]()
	counterSets := map[draapi.UniqueString]*draapi.CounterSet{}
	for _, s := range converted {
		for i := range s.Spec.SharedCounters {
			counterSets[s.Spec.SharedCounters[i].Name] = &s.Spec.SharedCounters[i]
		}
	}
	refs := 0
	for _, s := range converted {
		for _, d := range s.Spec.Devices {
			if names.Has(d.Name) {
				return 0, fmt.Errorf("duplicate device %s", d.Name.String())
			}
			names.Insert(d.Name)
			for _, cc := range d.ConsumesCounters {
				set, ok := counterSets[cc.CounterSet]
				if !ok {
					return 0, fmt.Errorf("counter set %s not found", cc.CounterSet.String())
				}
				for name := range cc.Counters {
					if _, ok := set.Counters[name]; !ok {
						return 0, fmt.Errorf("counter %s not found", name)
					}
					refs++
				}
			}
		}
	}
	// The available counters: every counter set copied, minus what the
	// allocated devices consume (none here: an idle node).
	for _, set := range counterSets {
		avail := make(map[string]resourceapi.Counter, len(set.Counters))
		for name, c := range set.Counters {
			c.Value = c.Value.DeepCopy()
			avail[name] = c
		}
		_ = avail
	}
	return refs, nil
}

var poolRebuildLayouts = []struct {
	name string
	opts slicebuilder.Options
	// everyCounterSet publishes every partitionable GPU's counter set,
	// as the spare layout did before counter sets followed the published
	// placements: the comparison for that change.
	everyCounterSet bool
}{
	{"whole-gpus", slicebuilder.Options{WholeGPUsOnly: true}, false},
	// fleet mode, no spare assigned: the compact layout (whole GPUs,
	// one empty counter slice, monitors)
	{"no-spare", slicebuilder.Options{SpareGPUs: slicebuilder.FleetAssigned(0)}, false},
	{"one-spare", slicebuilder.Options{}, false},
	{"one-spare-every-counter-set", slicebuilder.Options{}, true},
	{"every-gpu", slicebuilder.Options{SpareGPUs: slicebuilder.SpareGPUs{All: true}}, false},
}

// withEveryCounterSet is the pool with its counter slices (those holding
// counter sets in the every-GPU layout) as the every-GPU layout has them.
func withEveryCounterSet(tb testing.TB, inv gpu.Node, opts slicebuilder.Options, pool []resourceslice.Slice) []resourceslice.Slice {
	tb.Helper()
	opts.SpareGPUs = slicebuilder.SpareGPUs{All: true}
	every, err := slicebuilder.Build(inv, opts)
	if err != nil {
		tb.Fatal(err)
	}
	out := append([]resourceslice.Slice(nil), pool...)
	for i, s := range every.Pools[inv.Name].Slices {
		if len(s.SharedCounters) > 0 {
			out[i] = s
		}
	}
	return out
}

func BenchmarkPoolRebuild(b *testing.B) {
	inv := h100Inventory(b)
	for _, layout := range poolRebuildLayouts {
		opts := layout.opts
		opts.DriverName, opts.SysfsRoot = "gpu.gpudra.io", "/nonexistent"
		res, err := slicebuilder.Build(inv, opts)
		if err != nil {
			b.Fatal(err)
		}
		pool := res.Pools["node-0"].Slices
		if layout.everyCounterSet {
			pool = withEveryCounterSet(b, inv, opts, pool)
		}
		c := newAllocClusterFrom(b, pool, 1, 0)
		devices := 0
		for _, s := range c.slices {
			devices += len(s.Spec.Devices)
		}
		refs, err := rebuildPool(c.slices)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(layout.name+"/filter", func(b *testing.B) {
			run := c.allocator(b, "incubating", gpu1Claim())
			run()
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(devices), "devices")
			b.ReportMetric(float64(refs), "counter-refs")
			// every slice costs a conversion, empty or not: fleet
			// mode's compact layout (no-spare) publishes 3, the fixed
			// one 11
			b.ReportMetric(float64(len(c.slices)), "slices")
		})
		// A partition claim: allocated where placements are published,
		// refused on a node that publishes none (what a partition claim
		// costs on each of the nodes it tries that keep no spare).
		b.Run(layout.name+"/mig", func(b *testing.B) {
			run := c.tryAllocate(b, "incubating", benchClaim("mig-1g.10gb.gpudra.io"))
			run()
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
		})
		b.Run(layout.name+"/rebuild", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rebuildPool(c.slices); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPreFilterSlices is what the scheduler's PreFilter pays per pod
// for a fleet's slices before any node is tried: the allocator is built
// over every slice of the fleet (NewAllocator groups them by node), so
// each slice costs every pod, even an empty one. 1000 idle DGX H100
// nodes; whole GPUs only (2 slices per node) against a node without a
// spare (11: the partition and counter slices kept empty so that a spare
// appears without a new pool generation).
func BenchmarkPreFilterSlices(b *testing.B) {
	inv := h100Inventory(b)
	for _, layout := range poolRebuildLayouts[:3] {
		opts := layout.opts
		opts.DriverName, opts.SysfsRoot = "gpu.gpudra.io", "/nonexistent"
		res, err := slicebuilder.Build(inv, opts)
		if err != nil {
			b.Fatal(err)
		}
		c := newAllocClusterFrom(b, res.Pools["node-0"].Slices, 1000, 0)
		b.Run(layout.name, func(b *testing.B) {
			structured.EnableAllocators("incubating")
			b.Cleanup(func() { structured.EnableAllocators() })
			ctx := klog.NewContext(context.Background(), logr.Discard())
			cache := cel.NewCache(100, cel.Features{})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := structured.NewAllocator(ctx, allocatorFeatures["incubating"], c.state, c.classes, c.slices, cache); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.slices)), "slices")
		})
	}
}
