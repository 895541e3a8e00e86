package slicebuilder

import (
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
// Every intermediate pool is one a node may publish: whole GPUs always
// consume their counters, so no order of the partition slices ever lets
// a partition be allocated beside its whole GPU.

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
	for i := range wanted.Slices {
		if !SliceEqual(current.Slices[i], wanted.Slices[i]) {
			next = *current
			next.Slices = append([]resourceslice.Slice(nil), current.Slices...)
			next.Slices[i] = wanted.Slices[i]
			return next, false
		}
	}
	return wanted, true
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
