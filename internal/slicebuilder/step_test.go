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
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// TestStepsKeepTheGeneration runs upstream's ResourceSlice controller on a
// fake API server through changes that touch two slices at once (a spare
// partitioned, the next GPU made a spare; a sick spare tainted): handed
// over in one piece, each makes the controller start a new pool
// generation and write every slice again, and between those writes the
// pool is incomplete (the allocator allocates nothing on the node).
// Handed over as NextStep's single-slice steps, each change costs one
// update per changed slice, the generation stays, and the pool is
// complete after every write.
func TestStepsKeepTheGeneration(t *testing.T) {
	node := h100Node("node-a", 8)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	var ready map[string]bool
	plan := func(inUse map[string]gpu.Use, health map[string]gpu.Health) resourceslice.Pool {
		t.Helper()
		p, err := Plan(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, InUse: inUse, Health: health, MigReady: ready})
		if err != nil {
			t.Fatal(err)
		}
		ready = p.MigReady
		return p.Resources.Pools["node-a"]
	}
	changes := []struct {
		name   string
		inUse  map[string]gpu.Use
		health map[string]gpu.Health
		writes int
	}{
		// the next spare's counter set, its whole GPU consumes it, its
		// placements
		{"the spare partitioned", map[string]gpu.Use{node.GPUs[7].UUID: gpu.UsedByMIG}, nil, 3},
		// its placements hidden; GPU 5's counter set (GPU 6's kept); the
		// whole GPUs' counters (GPU 6's dropped, GPU 5's taken); GPU 5's
		// placements; GPU 6's counter set dropped
		{"the next spare taken whole", map[string]gpu.Use{node.GPUs[7].UUID: gpu.UsedByMIG, node.GPUs[6].UUID: gpu.UsedWhole}, nil, 5},
		{"all freed: the published GPUs stay", nil, nil, 0},
		{"a spare turns unhealthy", nil, map[string]gpu.Health{node.GPUs[5].UUID: gpu.Unhealthy}, 2},
	}

	for _, stepwise := range []bool{false, true} {
		t.Run(fmt.Sprintf("stepwise=%v", stepwise), func(t *testing.T) {
			ready = nil
			initial := plan(nil, nil)
			p := startPublisher(t, &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"node-a": initial}})
			p.waitFor(t, "initial publish", func(w writes) bool { return w.creates == len(initial.Slices) })
			p.settle(t)
			// After every write the API server must hold one complete
			// generation: the allocator ignores an incomplete pool.
			incomplete, events := watchCompleteness(t, p)
			held := initial
			for _, c := range changes {
				wanted := plan(c.inUse, c.health)
				before := p.writes()
				if !stepwise {
					p.update(t, &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"node-a": wanted}})
					p.settle(t)
					held = wanted
					continue
				}
				for {
					next, done := NextStep(&held, wanted)
					if done {
						break
					}
					p.update(t, &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"node-a": next}})
					p.settle(t)
					held = next
				}
				if got := p.writes().updates - before.updates; got != c.writes {
					t.Errorf("%s: %d updates, want %d", c.name, got, c.writes)
				}
			}
			if events() == 0 {
				t.Fatal("the watch saw no writes")
			}
			stored := p.slices(t)
			gen := stored[0].Spec.Pool.Generation
			for i, s := range stored {
				if !SliceEqual(resourceslice.Slice{Devices: s.Spec.Devices, SharedCounters: s.Spec.SharedCounters}, held.Slices[i]) {
					t.Errorf("slice %d is not what was handed over", i)
				}
			}
			switch {
			case stepwise && (gen != 1 || incomplete() != 0):
				t.Errorf("one slice at a time: generation %d, %d writes left the pool incomplete; want generation 1 and none", gen, incomplete())
			case !stepwise && (gen == 1 || incomplete() == 0):
				t.Errorf("two slices at once: generation %d, %d writes left the pool incomplete; upstream's controller no longer starts a new generation, and stepping may be unnecessary", gen, incomplete())
			}
			t.Logf("stepwise=%v: generation %d, %d of %d writes left the pool incomplete", stepwise, gen, incomplete(), events())
		})
	}
}

// watchCompleteness follows every write to the slices from now on and
// counts those after which the pool was not one complete generation.
func watchCompleteness(t *testing.T, p *publisher) (incomplete, events func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := p.cs.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]resourceapi.ResourceSlice{}
	for _, s := range p.slices(t) {
		held[s.Name] = s
	}
	var bad, seen atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*resourceapi.ResourceSlice)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(held, s.Name)
			} else {
				held[s.Name] = *s
			}
			seen.Add(1)
			if !completePool(slices.Collect(maps.Values(held))) {
				bad.Add(1)
			}
		}
	}()
	return func() int { return int(bad.Load()) }, func() int { return int(seen.Load()) }
}

// completePool says whether the slices hold exactly one complete
// generation of their pool.
func completePool(slices []resourceapi.ResourceSlice) bool {
	var newest int64
	n := 0
	for _, s := range slices {
		switch g := s.Spec.Pool.Generation; {
		case g > newest:
			newest, n = g, 1
		case g == newest:
			n++
		}
	}
	for _, s := range slices {
		if s.Spec.Pool.Generation == newest && int64(n) != s.Spec.Pool.ResourceSliceCount {
			return false
		}
	}
	return n > 0
}

// TestWithoutFeaturesIsWhatTheAPIServerStores: on every Kubernetes version
// check knows, a slice with counters, taints and shareable GPUs, with the
// fields of the version's disabled features dropped as its API server
// drops them (scheduler.DropDisabledFields), is WithoutFeatures of the
// slice: what the plugin compares with the API server once it was told
// those features are off, so that its steps do not wait for fields the
// server never stores.
func TestWithoutFeaturesIsWhatTheAPIServerStores(t *testing.T) {
	node := h100Node("node-a", 8)
	for i := range node.GPUs {
		node.GPUs[i].MIG = h100MIG()
	}
	health := map[string]gpu.Health{node.GPUs[7].UUID: gpu.Unhealthy}
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, Health: health, ConsumableCapacity: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range scheduler.KubernetesVersions {
		f, err := scheduler.FeaturesFor(version)
		if err != nil {
			t.Fatal(err)
		}
		disabled := map[string]bool{
			"DRAPartitionableDevices": !f.Allocator.PartitionableDevices,
			"DRADeviceTaints":         !f.Allocator.DeviceTaints,
			"DRAConsumableCapacity":   !f.Allocator.ConsumableCapacity,
		}
		dropped := false
		for i, s := range res.Pools["node-a"].Slices {
			stored := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: s.Devices, SharedCounters: s.SharedCounters,
				PerDeviceNodeSelection: s.PerDeviceNodeSelection}}
			stored = stored.DeepCopy()
			dropped = scheduler.DropDisabledFields(stored, f) || dropped
			have := resourceslice.Slice{Devices: stored.Spec.Devices, SharedCounters: stored.Spec.SharedCounters, PerDeviceNodeSelection: stored.Spec.PerDeviceNodeSelection}
			if !SliceEqual(WithoutFeatures(s, disabled), have) {
				t.Errorf("Kubernetes %s, slice %d: WithoutFeatures differs from what the API server stores", version, i)
			}
		}
		if want := disabled["DRAPartitionableDevices"] || disabled["DRADeviceTaints"] || disabled["DRAConsumableCapacity"]; dropped != want {
			t.Errorf("Kubernetes %s: the API server drops fields %v, want %v (the test's slices must use every feature)", version, dropped, want)
		}
	}
}
