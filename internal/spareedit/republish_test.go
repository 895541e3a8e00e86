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

package spareedit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const driver = gpu.DefaultDriverName

// published is what the allocator can be given on a node: the driver's
// devices and counter sets, by name.
type published struct {
	devices  map[string]resourceapi.Device
	counters map[string]resourceapi.CounterSet
}

func publishedOn(sl []*resourceapi.ResourceSlice, node string) published {
	p := published{devices: map[string]resourceapi.Device{}, counters: map[string]resourceapi.CounterSet{}}
	for _, s := range sl {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		for _, d := range s.Spec.Devices {
			p.devices[d.Name] = d
		}
		for _, c := range s.Spec.SharedCounters {
			p.counters[c.Name] = c
		}
	}
	return p
}

// sameAllocatable says how the edited slices and the profile's differ in
// what the allocator can allocate: the devices' names, attributes,
// capacities and counter use, and the counter sets.
func sameAllocatable(t *testing.T, edited, built []*resourceapi.ResourceSlice, node string) {
	t.Helper()
	e, b := publishedOn(edited, node), publishedOn(built, node)
	if got, want := slices.Sorted(maps.Keys(e.devices)), slices.Sorted(maps.Keys(b.devices)); !slices.Equal(got, want) {
		t.Fatalf("edited slices publish %d devices, the slice builder %d:\nonly edited: %v\nonly built: %v", len(got), len(want), missing(got, want), missing(want, got))
	}
	for name, d := range e.devices {
		w := b.devices[name]
		if !equality.Semantic.DeepEqual(d.Attributes, w.Attributes) {
			t.Errorf("%s: attributes %v, the slice builder's %v", name, d.Attributes, w.Attributes)
		}
		if !equality.Semantic.DeepEqual(d.Capacity, w.Capacity) {
			t.Errorf("%s: capacity %v, the slice builder's %v", name, d.Capacity, w.Capacity)
		}
		if !equality.Semantic.DeepEqual(d.ConsumesCounters, w.ConsumesCounters) && (len(d.ConsumesCounters) > 0 || len(w.ConsumesCounters) > 0) {
			t.Errorf("%s: consumes %v, the slice builder's %v", name, d.ConsumesCounters, w.ConsumesCounters)
		}
	}
	if got, want := slices.Sorted(maps.Keys(e.counters)), slices.Sorted(maps.Keys(b.counters)); !slices.Equal(got, want) {
		t.Errorf("counter sets %v, the slice builder's %v", got, want)
	}
	for name, c := range e.counters {
		if !equality.Semantic.DeepEqual(c, b.counters[name]) {
			t.Errorf("counter set %s differs from the slice builder's", name)
		}
	}
}

func missing(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// result is a device of node-1 held by a claim.
func result(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: "node-1", Device: device}
}

// spareMIG is a placement of the node's spare GPU published now: the
// first of the given profile.
func spareMIG(t *testing.T, sl []*resourceapi.ResourceSlice, node, token string) string {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(publishedOn(sl, node).devices)) {
		if p, ok := gpu.ParseDeviceName(name); ok && p.MIG && p.ProfileToken == token {
			return name
		}
	}
	t.Fatalf("node %s publishes no %s placement", node, token)
	return ""
}

// TestRefillAgreesWithSliceBuilder: on fake profile nodes, the refill by
// editing the published slices (Republisher) and the slice builder's
// (fakenodes.Republisher) give the allocator the same devices once a
// spare's partition is taken, a second one from the next spare, a spare
// taken whole, and a spare given to a fleet node that keeps none.
func TestRefillAgreesWithSliceBuilder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pool fakenodes.Pool
	}{
		{"one spare", fakenodes.Pool{}},
		{"two spares", fakenodes.Pool{SpareGPUs: slicebuilder.SpareGPUs{N: 2}}},
		{"fleet", fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(1), SpareNodes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given, err := fakenodes.SlicesOf(ctx, fakenodes.DefaultProfile, 2, driver, tc.pool)
			if err != nil {
				t.Fatal(err)
			}
			fp, err := fakenodes.NewRepublisher(fakenodes.DefaultProfile, driver, tc.pool)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fp.Close() }()
			ep := NewRepublisher(driver, given, nil)

			mig := spareMIG(t, given, "node-1", "1g10gb")
			first, _ := gpu.ParseDeviceName(mig)
			steps := map[string][][]resourceapi.DeviceRequestAllocationResult{
				"partition": {{result(mig)}},
				"whole":     {{result(fmt.Sprintf("gpu-%d", first.Minor))}},
			}
			for name, prepared := range steps {
				t.Run(name, func(t *testing.T) {
					built, err := fp.Slices(ctx, "node-1", prepared)
					if err != nil {
						t.Fatal(err)
					}
					edited, err := ep.Slices(ctx, "node-1", prepared)
					if err != nil {
						t.Fatal(err)
					}
					sameAllocatable(t, edited, built, "node-1")
				})
			}
			t.Run("partition twice", func(t *testing.T) {
				// The second partition is of the spare the first made.
				once, err := fp.Slices(ctx, "node-1", steps["partition"])
				if err != nil {
					t.Fatal(err)
				}
				var next string
				for _, name := range slices.Sorted(maps.Keys(publishedOn(once, "node-1").devices)) {
					if p, ok := gpu.ParseDeviceName(name); ok && p.MIG && p.ProfileToken == "7g80gb" && p.Minor != first.Minor {
						next = name
						break
					}
				}
				if next == "" {
					t.Fatal("no spare after the first partition")
				}
				prepared := [][]resourceapi.DeviceRequestAllocationResult{{result(mig)}, {result(next)}}
				built, err := fp.Slices(ctx, "node-1", prepared)
				if err != nil {
					t.Fatal(err)
				}
				edited, err := ep.Slices(ctx, "node-1", prepared)
				if err != nil {
					t.Fatal(err)
				}
				sameAllocatable(t, edited, built, "node-1")
			})
			if tc.pool.SpareGPUs.Fleet {
				t.Run("spare given", func(t *testing.T) {
					built, err := fp.SparedSlices(ctx, "node-2", nil)
					if err != nil || built == nil {
						t.Fatalf("the slice builder gives node-2 no spare: %v", err)
					}
					edited, err := ep.SparedSlices(ctx, "node-2", nil)
					if err != nil || edited == nil {
						t.Fatalf("editing gives node-2 no spare: %v", err)
					}
					sameAllocatable(t, edited, built, "node-2")
				})
			}
		})
	}
}

// TestNoTemplateNoRefill: where no GPU of the model publishes
// placements, nothing is refilled and no spare is given.
func TestNoTemplateNoRefill(t *testing.T) {
	ctx := context.Background()
	pool := fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(0)}
	given, err := fakenodes.SlicesOf(ctx, fakenodes.DefaultProfile, 1, driver, pool)
	if err != nil {
		t.Fatal(err)
	}
	ep := NewRepublisher(driver, given, nil)
	got, err := ep.SparedSlices(ctx, "node-1", nil)
	if err != nil || got != nil {
		t.Errorf("a spare given with no template: %d slices, %v", len(got), err)
	}
	out, err := ep.Slices(ctx, "node-1", [][]resourceapi.DeviceRequestAllocationResult{{result("gpu-0")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(publishedOn(out, "node-1").devices) != len(publishedOn(given, "node-1").devices) {
		t.Errorf("a whole GPU taken on a node with no spare changed what it publishes")
	}
}

// TestRefillAfterHeld: slices read from a cluster already show what its
// allocated claims hold (a partition of gpu-7, gpu-6 the spare since);
// held tells the Republisher that gpu-7 is no spare, so a partition of
// gpu-6 refills one GPU, gpu-5, as the slice builder does.
func TestRefillAfterHeld(t *testing.T) {
	ctx := context.Background()
	fp, err := fakenodes.NewRepublisher(fakenodes.DefaultProfile, driver, fakenodes.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fp.Close() }()
	held := []resourceapi.DeviceRequestAllocationResult{result("gpu-7-mig-1g10gb-0")}
	given, err := fp.Slices(ctx, "node-1", [][]resourceapi.DeviceRequestAllocationResult{held})
	if err != nil {
		t.Fatal(err)
	}
	ep := NewRepublisher(driver, given, held)
	next := []resourceapi.DeviceRequestAllocationResult{result("gpu-6-mig-1g10gb-0")}
	built, err := fp.Slices(ctx, "node-1", [][]resourceapi.DeviceRequestAllocationResult{held, next})
	if err != nil {
		t.Fatal(err)
	}
	edited, err := ep.Slices(ctx, "node-1", [][]resourceapi.DeviceRequestAllocationResult{next})
	if err != nil {
		t.Fatal(err)
	}
	sameAllocatable(t, edited, built, "node-1")
}
