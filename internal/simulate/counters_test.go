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
	"errors"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Counter sets only for the GPUs that publish their MIG placements
// (slicebuilder.Plan): a GPU's set appears, and its whole device consumes
// it, only while its placements are published. These tests walk the
// changes a node sees one slice at a time, as the plugin hands them to the
// ResourceSlice controller (slicebuilder.NextStep), and ask the real
// allocator, after every step, what the scheduler could allocate on the
// node at that moment, with claims that the scheduler has allocated but
// the node has not prepared yet (the plugin does not know of them).

// countersNode is a DGX H100 planned with the default layout.
type countersNode struct {
	t       *testing.T
	inv     gpu.Node
	classes *scheduler.Classes
}

func newCountersNode(t *testing.T) *countersNode {
	classes, err := LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	return &countersNode{t: t, inv: h100Inventory(t), classes: scheduler.NewClasses(classes)}
}

func (n *countersNode) uuid(minor int) string {
	for _, g := range n.inv.GPUs {
		if g.Minor == minor {
			return g.UUID
		}
	}
	n.t.Fatalf("no GPU %d", minor)
	return ""
}

func (n *countersNode) plan(inUse map[string]gpu.Use, ready map[string]bool) (resourceslice.Pool, map[string]bool) {
	n.t.Helper()
	p, err := slicebuilder.Plan(n.inv, slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent", InUse: inUse, MigReady: ready})
	if err != nil {
		n.t.Fatal(err)
	}
	return p.Resources.Pools["node-0"], p.MigReady
}

// allocate asks the real allocator to place claim on the node, with the
// pool published and the named devices held by claims already allocated:
// nil if it fits, scheduler.ErrUnschedulable if not, any other error if
// the allocator fails on the node (an invalid pool).
func (n *countersNode) allocate(pool resourceslice.Pool, held []string, claim *resourceapi.ResourceClaim) (*resourceapi.AllocationResult, error) {
	node := "node-0"
	var sl []*resourceapi.ResourceSlice
	for i, s := range pool.Slices {
		sl = append(sl, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%02x-gpu.gpudra.io-node-0", i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         "gpu.gpudra.io",
				Pool:           resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				NodeName:       &node,
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		})
	}
	state := scheduler.NewState()
	for i, d := range held {
		state.Add(fmt.Sprintf("default/held-%d", i), &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "gpu.gpudra.io", Pool: node, Device: d}},
		}})
	}
	s := scheduler.New(scheduler.DefaultFeatures(), n.classes, sl, nil)
	p, err := s.Schedule(context.Background(), state, []*resourceapi.ResourceClaim{claim}, nil)
	if err != nil {
		return nil, err
	}
	return p.Results[0], nil
}

// mustFit fails unless the claim fits; it returns the device it got.
func (n *countersNode) mustFit(what string, pool resourceslice.Pool, held []string, claim *resourceapi.ResourceClaim) string {
	n.t.Helper()
	res, err := n.allocate(pool, held, claim)
	if err != nil {
		n.t.Fatalf("%s: %s does not fit: %v", what, claim.Name, err)
	}
	return res.Devices.Results[0].Device
}

// mustNotFit fails unless the allocator finds no devices for the claim
// (and does not fail on the node: the pool stays valid).
func (n *countersNode) mustNotFit(what string, pool resourceslice.Pool, held []string, claim *resourceapi.ResourceClaim) {
	n.t.Helper()
	res, err := n.allocate(pool, held, claim)
	switch {
	case err == nil:
		n.t.Errorf("%s: %s fits on %v beside %v", what, claim.Name, res.Devices.Results, held)
	case !errors.Is(err, scheduler.ErrUnschedulable):
		n.t.Errorf("%s: the allocator fails on the node: %v", what, err)
	}
}

// steps hands the pool from current to wanted one slice at a time and
// calls check on every pool handed over (the last is wanted); it returns
// the slices changed, in order.
func steps(t *testing.T, current, wanted resourceslice.Pool, check func(step int, pool resourceslice.Pool)) []int {
	t.Helper()
	var order []int
	for cur := current; ; {
		next, done := slicebuilder.NextStep(&cur, wanted)
		if done {
			return order
		}
		for i := range next.Slices {
			if !slicebuilder.SliceEqual(next.Slices[i], cur.Slices[i]) {
				order = append(order, i)
			}
		}
		check(len(order), next)
		cur = next
		if len(order) > 20 {
			t.Fatal("no end of steps")
		}
	}
}

// Slices of the default layout on a DGX H100: 0 whole GPUs, 1 counter
// sets, 2-9 the placements of GPU 7 down to 0, 10 monitors.
const countersSlice = 1

func partitionSliceOf(minor int) int { return 2 + 7 - minor }

func oneGPUOn(name string, minor int) *resourceapi.ResourceClaim {
	return gpuClaim(name, 1, "", fmt.Sprintf("device.attributes['gpu.gpudra.io'].minor == %d", minor))
}

func partitionOn(name, uuid string) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{migRequest("mig", "1g.10gb", fmt.Sprintf("device.attributes['gpu.gpudra.io'].parentUUID == %q", uuid))}
	return claim
}

// TestCountersOnlyForPublishedPlacements: an idle node publishes the
// spare's counter set only, and its whole device alone consumes counters.
func TestCountersOnlyForPublishedPlacements(t *testing.T) {
	n := newCountersNode(t)
	pool, ready := n.plan(nil, nil)
	var sets []string
	for _, cs := range pool.Slices[countersSlice].SharedCounters {
		sets = append(sets, cs.Name)
	}
	if fmt.Sprint(sets) != "[gpu-7-counters]" || len(ready) != 1 || !ready[n.uuid(7)] {
		t.Fatalf("counter sets %v, ready %v; want GPU 7's only", sets, ready)
	}
	for _, d := range pool.Slices[0].Devices {
		if consumes := len(d.ConsumesCounters) > 0; consumes != (d.Name == "gpu-7") {
			t.Errorf("%s consumes counters: %v", d.Name, consumes)
		}
	}
	// A whole GPU without counters is still exclusive: once allocated,
	// the allocator gives it to no one else.
	n.mustNotFit("gpu-0 held", pool, []string{"gpu-0"}, oneGPUOn("again", 0))
	// The spare's whole GPU and its placements exclude each other.
	n.mustNotFit("gpu-7 held", pool, []string{"gpu-7"}, partitionOn("beside-whole", n.uuid(7)))
	n.mustNotFit("a partition of GPU 7 held", pool, []string{n.mustFit("idle", pool, nil, partitionOn("p", n.uuid(7)))}, oneGPUOn("whole-7", 7))
}

// TestSpareWhileAllocatedWholeNotPrepared: the spare (GPU 7) is
// partitioned and prepared, so GPU 6 becomes the spare, while the
// scheduler has allocated gpu-6 whole to a claim the node has not
// prepared yet. GPU 6's counter set appears, then its whole device
// consumes it, then its placements appear: at no step can a partition of
// GPU 6 be allocated beside the whole-GPU claim, and at every step the
// pool stays valid (other claims fit).
func TestSpareWhileAllocatedWholeNotPrepared(t *testing.T) {
	n := newCountersNode(t)
	idle, ready := n.plan(nil, nil)
	part := n.mustFit("idle", idle, nil, partitionOn("part", n.uuid(7)))
	held := []string{"gpu-6", part}
	wanted, ready := n.plan(map[string]gpu.Use{n.uuid(7): gpu.UsedByMIG}, ready)
	if !ready[n.uuid(6)] {
		t.Fatalf("GPU 6 is not the next spare: %v", ready)
	}
	order := steps(t, idle, wanted, func(step int, pool resourceslice.Pool) {
		what := fmt.Sprintf("after %d steps", step)
		n.mustNotFit(what, pool, held, partitionOn("beside", n.uuid(6)))
		n.mustFit(what, pool, held, partitionOn("next", n.uuid(7)))
		n.mustFit(what, pool, held, gpuClaim("whole", 1, ""))
	})
	if want := []int{countersSlice, 0, partitionSliceOf(6)}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("slices changed in order %v, want %v: GPU 6's counter set, its whole device's counters, its placements", order, want)
	}
	// Once gpu-6's claim is prepared, GPU 6 stops publishing: its
	// placements go first, then its whole device's counters, then its
	// counter set; GPU 5 becomes the spare.
	prepared, ready := n.plan(map[string]gpu.Use{n.uuid(7): gpu.UsedByMIG, n.uuid(6): gpu.UsedWhole}, ready)
	if ready[n.uuid(6)] || !ready[n.uuid(5)] {
		t.Fatalf("ready %v: want GPU 5, not GPU 6", ready)
	}
	order = steps(t, wanted, prepared, func(step int, pool resourceslice.Pool) {
		what := fmt.Sprintf("gpu-6 prepared, after %d steps", step)
		n.mustNotFit(what, pool, held, partitionOn("beside", n.uuid(6)))
		n.mustNotFit(what, pool, held, oneGPUOn("twice", 6))
		n.mustFit(what, pool, held, gpuClaim("whole", 1, ""))
	})
	// GPU 6's placements hidden; the counter slice gains GPU 5's set (and
	// keeps GPU 6's); the whole GPUs (GPU 6 consumes nothing, GPU 5
	// consumes); GPU 5's placements; GPU 6's set dropped.
	if want := []int{partitionSliceOf(6), countersSlice, 0, partitionSliceOf(5), countersSlice}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("slices changed in order %v, want %v", order, want)
	}
}

// TestSpareTakenWholeAndFreed: the spare taken whole stops publishing
// (placements, its whole device's counters, its counter set) and the next
// GPU becomes the spare; freed, it does not come back (GPU 6 is the spare
// now), and nothing is written.
func TestSpareTakenWholeAndFreed(t *testing.T) {
	n := newCountersNode(t)
	idle, ready := n.plan(nil, nil)
	held := []string{"gpu-7"}
	wanted, ready := n.plan(map[string]gpu.Use{n.uuid(7): gpu.UsedWhole}, ready)
	order := steps(t, idle, wanted, func(step int, pool resourceslice.Pool) {
		what := fmt.Sprintf("after %d steps", step)
		n.mustNotFit(what, pool, held, partitionOn("beside", n.uuid(7)))
		n.mustFit(what, pool, held, gpuClaim("whole", 1, ""))
	})
	if want := []int{partitionSliceOf(7), countersSlice, 0, partitionSliceOf(6), countersSlice}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("slices changed in order %v, want %v", order, want)
	}
	n.mustFit("GPU 6 the spare", wanted, held, partitionOn("next", n.uuid(6)))

	freed, _ := n.plan(nil, ready)
	if order := steps(t, wanted, freed, func(int, resourceslice.Pool) {}); len(order) != 0 {
		t.Errorf("gpu-7 freed: slices %v written, want none", order)
	}
	if d := n.mustFit("freed", freed, nil, oneGPUOn("again", 7)); d != "gpu-7" {
		t.Errorf("got %s", d)
	}
}

// TestCountersAfterRestart: a plugin that restarts reads the GPUs whose
// placements the API server holds (as waitForStoredSlices does) and
// publishes the same pool: no write. One that replaces a plugin which
// published every GPU's counter set (before this layout) drops the extra
// sets in one write, last, with the pool valid throughout.
func TestCountersAfterRestart(t *testing.T) {
	n := newCountersNode(t)
	idle, ready := n.plan(nil, nil)
	before, _ := n.plan(map[string]gpu.Use{n.uuid(7): gpu.UsedByMIG}, ready)
	// What the API server holds, read back as the plugin reads it.
	stored := map[string]bool{}
	for _, s := range before.Slices {
		for _, d := range s.Devices {
			if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG {
				stored[n.uuid(name.Minor)] = true
			}
		}
	}
	after, _ := n.plan(map[string]gpu.Use{n.uuid(7): gpu.UsedByMIG}, stored)
	if order := steps(t, before, after, func(int, resourceslice.Pool) {}); len(order) != 0 {
		t.Errorf("restart: slices %v written, want none", order)
	}

	// The layout before: every partitionable GPU's counter set.
	every, _ := slicebuilder.Plan(n.inv, slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent", SpareGPUs: slicebuilder.SpareGPUs{All: true}})
	old := idle
	old.Slices = append([]resourceslice.Slice(nil), idle.Slices...)
	old.Slices[countersSlice] = every.Resources.Pools["node-0"].Slices[countersSlice]
	if len(old.Slices[countersSlice].SharedCounters) != 8 {
		t.Fatalf("the old layout has %d counter sets", len(old.Slices[countersSlice].SharedCounters))
	}
	order := steps(t, old, idle, func(step int, pool resourceslice.Pool) {
		n.mustFit(fmt.Sprintf("after %d steps", step), pool, nil, partitionOn("p", n.uuid(7)))
	})
	if fmt.Sprint(order) != fmt.Sprint([]int{countersSlice}) {
		t.Errorf("upgrade: slices %v written, want the counter slice only", order)
	}
}
