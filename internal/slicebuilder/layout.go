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
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Chunk sizes. The device chunk is the smaller limit, the one that applies
// when any device in the slice has a taint or consumes counters, even for
// slices that have neither right now: a health taint can appear on any GPU
// at any time, and if the chunk size depended on it, one unhealthy GPU
// would re-cut every slice of the pool (many writes, a new pool generation)
// instead of updating the one slice that holds it.
const (
	devicesPerSlice     = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	counterSetsPerSlice = resourceapi.ResourceSliceMaxCounterSets
)

// poolLayout is one node's pool in publishing order. The ResourceSlice
// controller names each slice after its index in Pool.Slices, and the
// allocator walks slices in name order, first fit; so the order of the
// sections below is the order in which the scheduler considers devices.
//
//  1. whole GPUs: first, so that a whole-GPU claim does not walk MIG
//     placements before it finds a free GPU;
//  2. counter sets (MIG, partitionable devices): the v1 API forbids devices
//     and counters in one slice, so they get slices of their own; they hold
//     no devices, so their position costs the allocator nothing, and putting
//     them after the whole GPUs keeps the whole-GPU slices at the same
//     indices (and names) when MIG is switched on. Each partitionable GPU
//     has a fixed place in them (the n-th partitionable GPU in minor
//     order, slice n/8), and its set is there only while its placements
//     are published: a GPU never moves from one counter slice to another,
//     and the slices stay, empty when none of their GPUs publishes;
//  3. partitions (MIG placements): one slice per partitionable GPU,
//     highest minor first (see buildLayout), empty while the GPU does not
//     publish its placements;
//  4. monitoring devices (monitor.go): last, where no claim for a GPU or a
//     partition walks past them before it finds what it asks for.
//
// The number of slices depends on the GPUs only. The ResourceSlice
// controller (k8s.io/dynamic-resource-allocation/resourceslice) starts a
// new pool generation, and rewrites every slice of the pool, whenever a
// sync would add a slice, drop one, or update more than one; while it
// does, the allocator sees an incomplete pool and allocates nothing on the
// node. With a fixed number of slices, a GPU that starts or stops
// publishing its placements changes its partition slice and the whole
// GPUs' slice (its whole device consumes its counters exactly while its
// placements are published) and its counter slice (its counter set is
// published exactly then too), and the plugin hands the controller one
// changed slice at a time, in a safe order (NextStep).
//
// The one exception is fleet mode's compact layout (--mig-spare-gpus=
// fleet, where gpudra-controller keeps spares on a few nodes only): a node
// none of whose GPUs publishes placements (no spare assigned or sticky,
// nothing partitioned, no admin instances) publishes the whole GPUs, ONE
// empty counter slice and the monitors, and none of the other empty
// slices. In such a fleet almost every node is in that state, and every
// slice, empty or not, costs the allocator on every Filter call of every
// pod it tries on the node: a whole-GPU claim's Filter on an 8-GPU H100
// node took about 41.6 us with the fixed layout's 11 slices, 35.4 us with
// only the 2 that hold devices (BenchmarkPoolRebuild in internal/simulate,
// "no-spare" before this layout against "whole-gpus"; "no-spare" now
// measures it). The empty counter slice stays because it tells
// gpudra-controller that the pool can partition (internal/fleet,
// inventory.migSlots). Going between the compact and the fixed layout
// changes the number of slices, so it is one new pool generation (all the
// node's slices rewritten, and the pool unallocatable until they are);
// it happens only when the node's first GPU starts publishing
// placements (the controller assigned the node a spare, or an admin's
// instances appeared) or its last one stops (taken whole), never while
// placements come and go on a node that publishes some.
type poolLayout struct {
	wholeGPUs []resourceapi.Device
	// counterSets has one entry per partitionable GPU, in minor order.
	counterSets []counterSlot
	// partitions are the partitionable GPUs' placements, in slice order.
	partitions []gpuPartitions
	// monitors holds every GPU's monitoring device, in minor order.
	monitors []resourceapi.Device
	// compact: fleet mode and no GPU publishes placements; pool
	// publishes one empty counter slice and no partition slices.
	compact bool
}

// counterSlot is a partitionable GPU's place among the counter sets.
type counterSlot struct {
	set resourceapi.CounterSet
	// published: the GPU's placements are published, and so is its set.
	published bool
}

// gpuPartitions are one GPU's placements.
type gpuPartitions struct {
	uuid string
	// count is how many placements the GPU has: its slices hold up to
	// count devices, whether it publishes them or not.
	count int
	// devices are the placements, nil while the GPU does not publish
	// them (its slices stay, empty); build makes them.
	devices []resourceapi.Device
	build   func() []resourceapi.Device
}

// pool turns the layout into the controller's Pool. A node without devices
// still gets one empty slice: upstream asks drivers to publish one, because
// "empty pool" (the driver runs, there are no GPUs) differs from "no pool"
// (the driver is not running) to anyone debugging the node.
func (l poolLayout) pool() resourceslice.Pool {
	var out []resourceslice.Slice
	for _, devs := range chunk(l.wholeGPUs, devicesPerSlice) {
		out = append(out, resourceslice.Slice{Devices: devs})
	}
	switch {
	case l.compact && len(l.counterSets) > 0:
		// The one empty slice that says the pool can partition (see
		// above): no counter set is published, and no placement.
		out = append(out, resourceslice.Slice{})
	case !l.compact:
		for _, slots := range chunk(l.counterSets, counterSetsPerSlice) {
			var sets []resourceapi.CounterSet
			for _, c := range slots {
				if c.published {
					sets = append(sets, c.set)
				}
			}
			out = append(out, resourceslice.Slice{SharedCounters: sets})
		}
		for _, p := range l.partitions {
			for i := 0; i < p.count; i += devicesPerSlice {
				devs := []resourceapi.Device{}
				if p.devices != nil {
					devs = p.devices[i:min(i+devicesPerSlice, len(p.devices)):min(i+devicesPerSlice, len(p.devices))]
				}
				out = append(out, resourceslice.Slice{Devices: devs})
			}
		}
	}
	for _, devs := range chunk(l.monitors, devicesPerSlice) {
		out = append(out, resourceslice.Slice{Devices: devs})
	}
	if len(out) == 0 {
		out = []resourceslice.Slice{{}}
	}
	return resourceslice.Pool{Slices: out}
}

// chunk cuts items into consecutive pieces of at most size, in order. The
// pieces share the backing array of items; callers hand over ownership.
func chunk[T any](items []T, size int) [][]T {
	var out [][]T
	for len(items) > 0 {
		n := min(size, len(items))
		out = append(out, items[:n:n])
		items = items[n:]
	}
	return out
}
