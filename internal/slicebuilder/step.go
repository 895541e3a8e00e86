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
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Publishing one slice at a time.
//
// The ResourceSlice controller (k8s.io/dynamic-resource-allocation/
// resourceslice, v0.37) compares the pool it is given with the slices the
// API server holds, and keeps the pool's generation only when one sync
// updates at most one slice and creates none; otherwise it writes every
// slice of the pool again under a new generation. Until it has, the
// allocator sees the node's pool as incomplete (slices of the new
// generation missing) and allocates nothing on the node, and every
// informer in the cluster receives the whole pool again.
//
// Fleet mode's compact layout (layout.go) is the one case where what a
// node holds changes the number of slices: a node whose first GPU starts
// publishing placements, or whose last one stops, goes between the
// compact and the fixed layout in one new pool generation (NextStep hands
// the whole wanted pool). Within either layout the rules below hold.
//
// A change of what a node holds can touch two slices: a spare taken makes
// the next GPU a spare, a sick GPU's whole device and its placements are
// tainted. The plugin therefore never hands the controller more than one
// changed slice: NextStep is the pool to hand it next, and the plugin
// waits until the API server holds it before it asks for the next step.
//
// The steps go in an order that keeps every intermediate pool safe and
// valid: a GPU's counter set is published, and its whole device consumes
// it, only while its placements are published (Plan). So a GPU that
// becomes a spare must have its counter set published before its whole
// device consumes it (the allocator holds a pool whose devices consume a
// counter set it does not have invalid, and allocates nothing from it),
// and consume before its placements appear (or a placement could be given
// beside a whole-GPU claim allocated but not yet prepared); a GPU taken
// whole must lose its placements before its whole device stops consuming,
// and its counter set must stay until then. NextStep hands over first the
// slices that only lose devices, then the counter sets added or changed
// (a counter slice that also drops sets keeps them for now: the step is
// the union), then the slices whose devices stay the same (the whole
// GPUs, with counters added or dropped, taints), then those that gain
// devices, and last the counter slices that only drop sets; within each,
// in slice order.

// NextStep returns the pool to hand the ResourceSlice controller on the way
// from current (what it holds; nil if nothing, or not known) to wanted:
// current with the first slice that differs from wanted replaced by
// wanted's, so that the controller's sync updates one slice and keeps the
// pool's generation. Where the number of slices differs, or current is
// nil, it is wanted itself (a new generation cannot be avoided; this is the
// first publish, the hardware or the settings changed, or in fleet mode the
// node goes between the compact and the fixed layout, layout.go: its first
// GPU starts publishing placements, or its last stops). done says that
// current already is wanted.
func NextStep(current *resourceslice.Pool, wanted resourceslice.Pool) (next resourceslice.Pool, done bool) {
	if current == nil || len(current.Slices) != len(wanted.Slices) ||
		!equality.Semantic.DeepEqual(current.NodeSelector, wanted.NodeSelector) || current.AllNodes != wanted.AllNodes {
		return wanted, false
	}
	first, rank := -1, 0
	var slice resourceslice.Slice
	for i := range wanted.Slices {
		if SliceEqual(current.Slices[i], wanted.Slices[i]) {
			continue
		}
		if r, s := step(current.Slices[i], wanted.Slices[i]); first < 0 || r < rank {
			first, rank, slice = i, r, s
		}
	}
	if first < 0 {
		return wanted, true
	}
	next = *current
	next.Slices = append([]resourceslice.Slice(nil), current.Slices...)
	next.Slices[first] = slice
	return next, false
}

// Step ranks (see above), in the order they are handed over.
const (
	rankLosesDevices = iota
	rankCountersAdded
	rankSameDevices
	rankGainsDevices
	rankCountersDropped
)

// step is how one changed slice goes towards wanted: its rank, and the
// slice to hand over for it (wanted's, or for a counter slice that both
// drops and adds or changes counter sets, the union: wanted's sets, then
// the current ones wanted drops).
func step(current, wanted resourceslice.Slice) (int, resourceslice.Slice) {
	if r := stepRank(current, wanted); r != rankCountersAdded {
		return r, wanted
	}
	keep := make(map[string]bool, len(wanted.SharedCounters))
	changed := false
	for _, w := range wanted.SharedCounters {
		keep[w.Name] = true
		i := slices.IndexFunc(current.SharedCounters, func(c resourceapi.CounterSet) bool { return c.Name == w.Name })
		if i < 0 || !equality.Semantic.DeepEqual(current.SharedCounters[i], w) {
			changed = true
		}
	}
	if !changed {
		return rankCountersDropped, wanted
	}
	union := wanted
	union.SharedCounters = slices.Clone(wanted.SharedCounters)
	for _, c := range current.SharedCounters {
		if !keep[c.Name] {
			union.SharedCounters = append(union.SharedCounters, c)
		}
	}
	if len(union.SharedCounters) > resourceapi.ResourceSliceMaxCounterSets {
		// Not a layout Plan makes (a GPU keeps its place among the
		// counter slices): the slice as wanted, valid for the API server.
		return rankCountersAdded, wanted
	}
	return rankCountersAdded, union
}

// stepRank orders the changed slices by their devices (see above):
// rankLosesDevices for a slice that only loses devices, rankCountersAdded
// for counter sets changed (step tells added from dropped),
// rankSameDevices for the same devices changed, rankGainsDevices for a
// slice that gains devices.
func stepRank(current, wanted resourceslice.Slice) int {
	have := make(map[string]bool, len(current.Devices))
	for _, d := range current.Devices {
		have[d.Name] = true
	}
	gains := false
	for _, d := range wanted.Devices {
		if !have[d.Name] {
			gains = true
		}
		delete(have, d.Name)
	}
	switch {
	case gains:
		return rankGainsDevices
	case len(have) > 0:
		return rankLosesDevices
	case !equality.Semantic.DeepEqual(current.SharedCounters, wanted.SharedCounters):
		return rankCountersAdded
	}
	return rankSameDevices
}

// SliceEqual says whether the ResourceSlice controller would write
// nothing to turn one slice into the other: the devices compared as it
// compares them (resourceslice.DevicesDeepEqual: a taint's time added
// does not count), the rest semantically.
func SliceEqual(a, b resourceslice.Slice) bool {
	return resourceslice.DevicesDeepEqual(a.Devices, b.Devices) &&
		equality.Semantic.DeepEqual(a.SharedCounters, b.SharedCounters) &&
		equality.Semantic.DeepEqual(a.PerDeviceNodeSelection, b.PerDeviceNodeSelection) &&
		equality.Semantic.DeepEqual(a.PartitionTypeAttribute, b.PartitionTypeAttribute) &&
		equality.Semantic.DeepEqual(a.SkipNodeOperations, b.SkipNodeOperations)
}

// WithoutFeatures is the slice as an API server that has the named
// features disabled stores it (the names resourceslice.DroppedFieldsError
// reports): the fields of those features dropped. Comparing what was
// published with what the API server holds goes through it, since such a
// server never holds the fields, however often they are written.
func WithoutFeatures(s resourceslice.Slice, disabled map[string]bool) resourceslice.Slice {
	if len(disabled) == 0 {
		return s
	}
	if disabled["DRAPartitionableDevices"] {
		s.SharedCounters, s.PerDeviceNodeSelection = nil, nil
	}
	if disabled["DRAPartitionableDevicesType"] {
		s.PartitionTypeAttribute = nil
	}
	if disabled["DRAOptionalNodeOperations"] {
		s.SkipNodeOperations = nil
	}
	devices := make([]resourceapi.Device, len(s.Devices))
	for i, d := range s.Devices {
		if disabled["DRADeviceTaints"] {
			d.Taints = nil
		}
		if disabled["DRAPartitionableDevices"] {
			d.ConsumesCounters, d.NodeName, d.NodeSelector, d.AllNodes = nil, nil, nil, nil
		}
		if disabled["DRADeviceBindingConditions"] {
			d.BindingConditions, d.BindingFailureConditions, d.BindsToNode = nil, nil, nil
		}
		if disabled["DRAConsumableCapacity"] {
			d.AllowMultipleAllocations = nil
			if len(d.Capacity) > 0 {
				capacity := make(map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, len(d.Capacity))
				for name, c := range d.Capacity {
					c.RequestPolicy = nil
					capacity[name] = c
				}
				d.Capacity = capacity
			}
		}
		devices[i] = d
	}
	s.Devices = devices
	return s
}
