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
	case layoutGpudra, layoutNodeSpares, layoutAllSpares, layoutFewProfiles, layoutEveryCounterSet:
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

// hidden holds what hideBusy changed of each slice, by slice name: its
// devices and counter sets as they were.
type hidden map[string]sliceContent

type sliceContent struct {
	devices  []resourceapi.Device
	counters []resourceapi.CounterSet
}

// hideBusy takes the placements of every GPU the 90% state took whole out
// of the slices, as gpudra's plugin does once it has prepared the claims.
// In the gpudra layout it also moves the fleet's spares to the nodes
// gpudra-controller would keep them on in that state (fleetSpareNode):
// their slices become what the plugin publishes with one spare assigned.
func (f *fleet) hideBusy(ctx context.Context, packed bool, layout, profile string) (hidden, error) {
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
	// The slice names sort as the builder's slices (sliceObjects).
	slices.SortFunc(items, func(a, b resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	moved := map[string][]resourceslice.Slice{}
	if layout == layoutGpudra {
		var err error
		if moved, err = f.movedSpares(ctx, profile, packed); err != nil {
			return nil, err
		}
	}
	h := hidden{}
	var changed []resourceapi.ResourceSlice
	nth := map[string]int{}
	for _, s := range items {
		if s.Spec.NodeName == nil {
			continue
		}
		node := *s.Spec.NodeName
		i, err := strconv.Atoi(strings.TrimPrefix(node, "fleet-"))
		if err != nil {
			return nil, fmt.Errorf("slice %s of node %s: not a fleet node", s.Name, node)
		}
		was := sliceContent{devices: s.Spec.Devices, counters: s.Spec.SharedCounters}
		if pool, ok := moved[node]; ok {
			k := nth[node]
			nth[node]++
			if k >= len(pool) {
				return nil, fmt.Errorf("node %s: %d slices stored, the builder makes %d", node, k+1, len(pool))
			}
			s.Spec.Devices, s.Spec.SharedCounters = pool[k].Devices, pool[k].SharedCounters
		}
		busy := busyGPUs(i, packed)
		s.Spec.Devices = withoutHeldPlacements(s.Spec.Devices, func(minor int) bool { return minor < busy })
		if equality.Semantic.DeepEqual(was.devices, s.Spec.Devices) && equality.Semantic.DeepEqual(was.counters, s.Spec.SharedCounters) {
			continue
		}
		h[s.Name] = was
		changed = append(changed, s)
	}
	err := parallel(len(changed), apiWorkers, func(i int) error {
		_, err := f.client.ResourceV1().ResourceSlices().Update(ctx, &changed[i], metav1.UpdateOptions{})
		return err
	})
	return h, err
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

// unhide puts the devices hideBusy took out back.
func (f *fleet) unhide(ctx context.Context, h hidden) error {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	return parallel(len(names), apiWorkers, func(i int) error {
		s, err := f.client.ResourceV1().ResourceSlices().Get(ctx, names[i], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Devices, s.Spec.SharedCounters = h[names[i]].devices, h[names[i]].counters
		_, err = f.client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}
