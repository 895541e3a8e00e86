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
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
)

// hidesBusy says whether the layout leaves out the placements of GPUs
// held whole, as gpudra's plugin does once the claims that hold them are
// prepared: the benchmark takes them out of the slices when it fills the
// fleet (hideBusy), exactly as the slice builder leaves them out
// (TestHideBusyIsTheBuilders). No kubelet runs, so nothing else changes
// what a node publishes: the spares a partition claim takes are not
// refilled during a cell (the cells take far fewer partitions than the
// spares hold).
func hidesBusy(layout string) bool {
	switch layout {
	case layoutGpudra, layoutPartitionPool, layoutNodeSpares, layoutAllSpares, layoutFewProfiles, layoutEveryCounterSet:
		return true
	}
	return false
}

// withoutHeldPlacements returns the devices but the MIG placements of the
// GPUs (by minor) that held says are taken whole.
func withoutHeldPlacements(devices []resourceapi.Device, held func(minor int) bool) []resourceapi.Device {
	out := []resourceapi.Device{}
	for _, d := range devices {
		if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG && held(name.Minor) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// hidden holds what hideBusy changed: of each slice changed in place, by
// slice name, its devices and counter sets as they were; of each node
// whose pool it replaced (a different number of slices), by node, the
// slices as they were.
type hidden struct {
	slices map[string]sliceContent
	pools  map[string][]resourceslice.Slice
}

type sliceContent struct {
	devices  []resourceapi.Device
	counters []resourceapi.CounterSet
}

// busySlices is what a node publishes once the GPUs below minor busy are
// taken whole, from what it publishes idle (current: its slices, or the
// builder's with a spare where one moved to it): current without the held
// GPUs' placements. In the gpudra layout a node that publishes no
// placement at all then publishes fleet mode's compact layout (slicebuilder's
// layout.go), compact's (the builder's, idle and without a spare; called
// only then), and the number of its slices changes.
func busySlices(layout string, current []resourceslice.Slice, busy int, compact func() ([]resourceslice.Slice, error)) ([]resourceslice.Slice, error) {
	held := func(minor int) bool { return minor < busy }
	out := make([]resourceslice.Slice, len(current))
	had, has := false, false
	for i, s := range current {
		out[i] = s
		out[i].Devices = withoutHeldPlacements(s.Devices, held)
		had = had || hasPlacements(s.Devices)
		has = has || hasPlacements(out[i].Devices)
	}
	if layout == layoutGpudra && had && !has {
		return compact()
	}
	return out, nil
}

// hasPlacements says whether any of the devices is a MIG placement.
func hasPlacements(devices []resourceapi.Device) bool {
	for _, d := range devices {
		if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG {
			return true
		}
	}
	return false
}

// hideBusy takes the placements of every GPU the 90% state took whole out
// of the slices, as gpudra's plugin does once it has prepared the claims.
// In the gpudra layout it also moves the fleet's spares to the nodes
// gpudra-controller would keep them on in that state (fleetSpareNode):
// their slices become what the plugin publishes with one spare assigned;
// and a node left without placements publishes the compact layout
// (busySlices). A node whose number of slices changes gets its pool
// replaced under a new generation, as the ResourceSlice controller
// replaces it; the others' slices are updated in place.
func (f *fleet) hideBusy(ctx context.Context, packed bool, layout, profile string) (hidden, error) {
	h := hidden{slices: map[string]sliceContent{}, pools: map[string][]resourceslice.Slice{}}
	items, err := f.listSlices(ctx)
	if err != nil {
		return h, err
	}
	moved := map[string][]resourceslice.Slice{}
	if layout == layoutGpudra {
		if moved, err = f.movedSpares(ctx, profile, packed); err != nil {
			return h, err
		}
	}
	byNode, nodes := slicesByNode(items)
	dir, err := os.MkdirTemp("", "gpudra-fleetbench-compact-")
	if err != nil {
		return h, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var changed []resourceapi.ResourceSlice
	var replaced []string
	wanted := map[string][]resourceslice.Slice{}
	for _, node := range nodes {
		stored := byNode[node]
		current, want, err := busyNodeSlices(ctx, node, stored, moved, packed, layout, profile, dir)
		if err != nil {
			return h, err
		}
		if len(want) != len(stored) {
			h.pools[node], wanted[node] = current, want
			replaced = append(replaced, node)
			continue
		}
		for k, s := range stored {
			if equality.Semantic.DeepEqual(s.Spec.Devices, want[k].Devices) && equality.Semantic.DeepEqual(s.Spec.SharedCounters, want[k].SharedCounters) {
				continue
			}
			h.slices[s.Name] = sliceContent{devices: s.Spec.Devices, counters: s.Spec.SharedCounters}
			s.Spec.Devices, s.Spec.SharedCounters = want[k].Devices, want[k].SharedCounters
			changed = append(changed, s)
		}
	}
	err = parallel(len(changed), apiWorkers, func(i int) error {
		_, err := f.client.ResourceV1().ResourceSlices().Update(ctx, &changed[i], metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return h, err
	}
	err = parallel(len(replaced), apiWorkers, func(i int) error {
		node := replaced[i]
		return f.replacePool(ctx, node, byNode[node], wanted[node])
	})
	return h, err
}

// listSlices lists every ResourceSlice, a page at a time, sorted by name:
// the slice names sort as the builder's slices (sliceObjects).
func (f *fleet) listSlices(ctx context.Context) ([]resourceapi.ResourceSlice, error) {
	var items []resourceapi.ResourceSlice
	for opts := (metav1.ListOptions{Limit: 500}); ; {
		list, err := f.client.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = append(items, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.SortFunc(items, func(a, b resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	return items, nil
}

// slicesByNode groups the node-local slices by node, and lists the nodes
// in the order first met.
func slicesByNode(items []resourceapi.ResourceSlice) (map[string][]resourceapi.ResourceSlice, []string) {
	byNode := map[string][]resourceapi.ResourceSlice{}
	var nodes []string
	for _, s := range items {
		if s.Spec.NodeName == nil {
			continue
		}
		node := *s.Spec.NodeName
		if _, ok := byNode[node]; !ok {
			nodes = append(nodes, node)
		}
		byNode[node] = append(byNode[node], s)
	}
	return byNode, nodes
}

// busyNodeSlices returns what a fleet node publishes now (current) and
// what it publishes in the 90% state (busySlices): from its idle slices,
// or the pool a moved spare gives it (moved), with the compact layout
// built in dir when the node is left without placements.
func busyNodeSlices(ctx context.Context, node string, stored []resourceapi.ResourceSlice, moved map[string][]resourceslice.Slice, packed bool, layout, profile, dir string) (current, want []resourceslice.Slice, err error) {
	i, err := strconv.Atoi(strings.TrimPrefix(node, "fleet-"))
	if err != nil {
		return nil, nil, fmt.Errorf("slices of node %s: not a fleet node", node)
	}
	current = make([]resourceslice.Slice, len(stored))
	for k, s := range stored {
		current[k] = resourceslice.Slice{Devices: s.Spec.Devices, SharedCounters: s.Spec.SharedCounters}
	}
	idle := current
	if pool, ok := moved[node]; ok {
		idle = pool
	}
	want, err = busySlices(layout, idle, busyGPUs(i, packed), func() (out []resourceslice.Slice, err error) {
		err = fakenodes.WithNode(ctx, profile, node, dir, func(n gpu.Node, sysfsRoot string) error {
			out, err = nodeSlices(n, sysfsRoot, driverName, layoutGpudra, false)
			return err
		})
		return out, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: %w", node, err)
	}
	return current, want, nil
}

// replacePool publishes the node's pool anew, under the next generation,
// and deletes the slices of the old one (stored), as the ResourceSlice
// controller does when the number of slices changes.
func (f *fleet) replacePool(ctx context.Context, node string, stored []resourceapi.ResourceSlice, pool []resourceslice.Slice) error {
	var gen int64
	for _, s := range stored {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	for _, s := range sliceObjects(driverName, node, pool) {
		s.Spec.Pool.Generation = gen + 1
		if _, err := f.client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice of %s: %w", node, err)
		}
	}
	for _, s := range stored {
		if err := f.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete ResourceSlice %s: %w", s.Name, err)
		}
	}
	return nil
}

// movedSpares returns the slices, with one spare, of the nodes that keep
// the fleet's spares in the 90% state but not on the empty fleet.
func (f *fleet) movedSpares(ctx context.Context, profile string, packed bool) (map[string][]resourceslice.Slice, error) {
	dir, err := os.MkdirTemp("", "gpudra-fleetbench-spares-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := map[string][]resourceslice.Slice{}
	for i, name := range f.nodes {
		if !fleetSpareNode(i, true, packed) || fleetSpareNode(i, false, false) {
			continue
		}
		err := fakenodes.WithNode(ctx, profile, name, dir, func(node gpu.Node, sysfsRoot string) error {
			pool, err := nodeSlices(node, sysfsRoot, driverName, layoutGpudra, true)
			out[name] = pool
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("node %s with a spare: %w", name, err)
		}
	}
	return out, nil
}

// unhide puts the devices hideBusy took out back, and the pools it
// replaced.
func (f *fleet) unhide(ctx context.Context, h hidden) error {
	names := make([]string, 0, len(h.slices))
	for name := range h.slices {
		names = append(names, name)
	}
	err := parallel(len(names), apiWorkers, func(i int) error {
		s, err := f.client.ResourceV1().ResourceSlices().Get(ctx, names[i], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Devices, s.Spec.SharedCounters = h.slices[names[i]].devices, h.slices[names[i]].counters
		_, err = f.client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	nodes := make([]string, 0, len(h.pools))
	for node := range h.pools {
		nodes = append(nodes, node)
	}
	return parallel(len(nodes), apiWorkers, func(i int) error {
		node := nodes[i]
		list, err := f.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + node,
		})
		if err != nil {
			return err
		}
		var stored []resourceapi.ResourceSlice
		for _, s := range list.Items {
			if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
				stored = append(stored, s)
			}
		}
		return f.replacePool(ctx, node, stored, h.pools[node])
	})
}
