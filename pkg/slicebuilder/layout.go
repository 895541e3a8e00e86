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
//  1. whole GPUs: first, so that a whole-GPU claim on a busy node does not
//     walk every MIG placement before it finds a free GPU;
//  2. counter sets (MIG, partitionable devices): the v1 API forbids devices
//     and counters in one slice, so they get slices of their own; they hold
//     no devices, so their position costs the allocator nothing, and putting
//     them after the whole GPUs keeps the whole-GPU slices at the same
//     indices (and names) when MIG is switched on;
//  3. partitions (MIG placements);
//  4. monitoring devices (monitor.go): last, where no claim for a GPU or a
//     partition walks past them before it finds what it asks for.
//
// Each section is cut into chunks within the API limits. Partitions are
// grouped by GPU and a GPU's placements are never split across slices, so
// that a health change on one GPU rewrites one partition slice.
type poolLayout struct {
	wholeGPUs   []resourceapi.Device
	counterSets []resourceapi.CounterSet
	// partitions holds each partitionable GPU's placements, in minor order.
	partitions [][]resourceapi.Device
	// partitionsHidden says, for each group of partitions, that it is
	// left out (its GPU is held whole): it is packed all the same, so
	// that hiding it changes its own slice only.
	partitionsHidden []bool
	// monitors holds every GPU's monitoring device, in minor order.
	monitors []resourceapi.Device
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
	for _, sets := range chunk(l.counterSets, counterSetsPerSlice) {
		out = append(out, resourceslice.Slice{SharedCounters: sets})
	}
	for _, devs := range l.packedPartitions() {
		out = append(out, resourceslice.Slice{Devices: devs})
	}
	for _, devs := range chunk(l.monitors, devicesPerSlice) {
		out = append(out, resourceslice.Slice{Devices: devs})
	}
	if len(out) == 0 {
		out = []resourceslice.Slice{{}}
	}
	return resourceslice.Pool{Slices: out}
}

// packedPartitions packs the partitions into slices as if none were
// hidden, then leaves the hidden ones out: a slice may end up empty, and
// stays, so that the number of slices (and the pool's generation) does
// not change when a GPU is taken whole or given back.
func (l poolLayout) packedPartitions() [][]resourceapi.Device {
	type tagged struct {
		hidden bool
		device resourceapi.Device
	}
	groups := make([][]tagged, len(l.partitions))
	for i, devs := range l.partitions {
		hidden := i < len(l.partitionsHidden) && l.partitionsHidden[i]
		for _, d := range devs {
			groups[i] = append(groups[i], tagged{hidden, d})
		}
	}
	var out [][]resourceapi.Device
	for _, piece := range pack(groups, devicesPerSlice) {
		devs := []resourceapi.Device{}
		for _, t := range piece {
			if !t.hidden {
				devs = append(devs, t.device)
			}
		}
		out = append(out, devs)
	}
	return out
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

// pack concatenates groups into pieces of at most size, in order, starting
// a new piece where the next group would not fit; a group larger than size
// is cut.
func pack[T any](groups [][]T, size int) [][]T {
	var out [][]T
	var cur []T
	for _, g := range groups {
		if len(cur) > 0 && len(cur)+len(g) > size {
			out = append(out, cur)
			cur = nil
		}
		for len(g) > size {
			out = append(out, g[:size:size])
			g = g[size:]
		}
		cur = append(cur, g...)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
