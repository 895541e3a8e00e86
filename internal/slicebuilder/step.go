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
// A change of what a node holds can touch two slices: a spare taken makes
// the next GPU a spare, a sick GPU's whole device and its placements are
// tainted. The plugin therefore never hands the controller more than one
// changed slice: NextStep is the pool to hand it next, and the plugin
// waits until the API server holds it before it asks for the next step.
//
// The steps go in an order that keeps every intermediate pool safe: a
// whole GPU consumes its counters only while its placements are published
// (Plan), so a GPU that becomes a spare must consume them before its
// placements appear, and a GPU taken whole must lose its placements before
// it stops consuming. NextStep hands over first the slices that only lose
// devices, then those whose devices stay the same (the whole GPUs, with
// counters added or dropped, taints; counter sets before devices), then
// those that gain devices; within each, in slice order.

// NextStep returns the pool to hand the ResourceSlice controller on the way
// from current (what it holds; nil if nothing, or not known) to wanted:
// current with the first slice that differs from wanted replaced by
// wanted's, so that the controller's sync updates one slice and keeps the
// pool's generation. Where the number of slices differs, or current is
// nil, it is wanted itself (a new generation cannot be avoided; this is the
// first publish, or the hardware or the settings changed). done says that
// current already is wanted.
func NextStep(current *resourceslice.Pool, wanted resourceslice.Pool) (next resourceslice.Pool, done bool) {
	if current == nil || len(current.Slices) != len(wanted.Slices) ||
		!equality.Semantic.DeepEqual(current.NodeSelector, wanted.NodeSelector) || current.AllNodes != wanted.AllNodes {
		return wanted, false
	}
	first, rank := -1, 0
	for i := range wanted.Slices {
		if SliceEqual(current.Slices[i], wanted.Slices[i]) {
			continue
		}
		if r := stepRank(current.Slices[i], wanted.Slices[i]); first < 0 || r < rank {
			first, rank = i, r
		}
	}
	if first < 0 {
		return wanted, true
	}
	next = *current
	next.Slices = append([]resourceslice.Slice(nil), current.Slices...)
	next.Slices[first] = wanted.Slices[first]
	return next, false
}

// stepRank orders the changed slices (see above): 0 for a slice that only
// loses devices, 1 for counter sets changed, 2 for the same devices
// changed, 3 for a slice that gains devices.
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
		return 3
	case len(have) > 0:
		return 0
	case !equality.Semantic.DeepEqual(current.SharedCounters, wanted.SharedCounters):
		return 1
	}
	return 2
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
