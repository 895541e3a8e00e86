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
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The ResourceSlice layouts compared, all built from gpudra's slice builder
// for the same discovered GPUs, so that only the layout differs.
const (
	// layoutGpudra is what gpudra publishes by default: whole GPUs first,
	// the counter sets, then one slice per GPU for its MIG placements,
	// published only on the GPUs that can take the next partition claims
	// (--mig-spare-gpus=fleet: one free GPU on each of the nodes
	// gpudra-controller keeps spares on, 5% of the fleet; see
	// fleetSpareNode).
	layoutGpudra = "gpudra"
	// layoutWhole is what gpudra publishes where the cluster does not
	// serve partitionable devices: whole GPUs only, no MIG.
	layoutWhole = "whole-gpus"
	// layoutNVIDIA is every MIG placement of every GPU, gpudra's devices,
	// in the split layout NVIDIA's DRA driver publishes with dynamic MIG
	// on Kubernetes >= 1.35: one slice with every counter set, then one
	// slice per GPU holding the whole GPU and its placements, GPU after
	// GPU. A whole-GPU claim on a busy node walks the placements of every
	// taken GPU before the next free one.
	layoutNVIDIA = "nvidia-shaped"
)

// Levers on gpudra's side, measured as layouts of their own:
const (
	// layoutNodeSpares is gpudra's layout with --mig-spare-gpus=1: one
	// free GPU of every node publishes its placements, gpudra's default
	// before spares were kept across the fleet.
	layoutNodeSpares = "gpudra-node-spares"
	// layoutAllSpares is gpudra's layout with --mig-spare-gpus=all: every
	// free GPU publishes its placements (200 on an idle DGX H100), as
	// gpudra did before spares.
	layoutAllSpares = "gpudra-all-spares"
	// layoutFewProfiles is gpudra's layout with --mig-profiles=
	// 1g.10gb,3g.40gb,7g.80gb (the choice docs/mig.md shows): 11
	// placements per spare GPU instead of 25.
	layoutFewProfiles = "gpudra-3-profiles"
	// layoutEveryCounterSet is gpudra's layout with every partitionable
	// GPU's counter set published, whether its placements are or not, as
	// gpudra did before counter sets followed the published placements:
	// the comparison for that change.
	layoutEveryCounterSet = "gpudra-every-counter-set"
	// layoutPartitionPool is gpudra's default layout (--mig-spare-gpus=
	// fleet) on a node pool whose recent claims are partitions:
	// gpudra-controller's spares follow demand
	// (--mig-spare-follow-demand), so it keeps one on every node with a
	// free GPU. The gpudra layout is the same pool running whole GPUs.
	layoutPartitionPool = "gpudra-partition-pool"
)

// layouts in the order the report shows them: the three compared, then
// the levers.
var (
	compared = []string{layoutGpudra, layoutWhole, layoutNVIDIA}
	levers   = []string{layoutPartitionPool, layoutNodeSpares, layoutAllSpares, layoutFewProfiles, layoutEveryCounterSet}
	layouts  = append(append([]string{}, compared...), levers...)
)

// fewProfiles is what layoutFewProfiles passes as --mig-profiles.
const fewProfiles = "1g.10gb,3g.40gb,7g.80gb"

// hasMIG says whether the layout publishes MIG placements.
func hasMIG(layout string) bool { return layout != layoutWhole }

// fleetSpareEvery is one node in how many that keeps a spare in the
// gpudra layout: gpudra-controller's default budget, --mig-spare-nodes=5%.
const fleetSpareEvery = 20

// fleetSpareNode says whether node i keeps the fleet's spare in the gpudra
// layout, in the fleet state (packed: see busyGPUs). gpudra-controller
// keeps spares on nodes with a free GPU, so the choice follows the state:
// on the empty fleet and the packed one, one node in twenty from the
// ninth (the packed state leaves those empty); on the 90% fleet, where
// those nodes are full and their spares taken whole, the controller has
// assigned the one before each instead, whose eighth GPU is free.
func fleetSpareNode(i int, busy, packed bool) bool {
	if busy && !packed {
		return i%fleetSpareEvery == fleetSpareEvery-2
	}
	return i%fleetSpareEvery == fleetSpareEvery-1
}

// layoutOptions are the slice builder's options for a layout; spare says,
// for the gpudra layout, whether the node keeps one of the fleet's spares.
func layoutOptions(driver, sysfsRoot, layout string, spare bool) (slicebuilder.Options, error) {
	opts := slicebuilder.Options{DriverName: driver, SysfsRoot: sysfsRoot}
	switch layout {
	case layoutGpudra:
		opts.SpareGPUs = slicebuilder.FleetAssigned(0)
		if spare {
			opts.SpareGPUs = slicebuilder.FleetAssigned(1)
		}
	case layoutPartitionPool:
		opts.SpareGPUs = slicebuilder.FleetAssigned(1)
	case layoutNodeSpares, layoutEveryCounterSet:
	case layoutWhole:
		opts.WholeGPUsOnly = true
	case layoutNVIDIA, layoutAllSpares:
		opts.SpareGPUs = slicebuilder.SpareGPUs{All: true}
	case layoutFewProfiles:
		var err error
		if opts.MigProfiles, err = slicebuilder.ParseMigProfiles(fewProfiles); err != nil {
			return opts, err
		}
	default:
		return opts, fmt.Errorf("unknown layout %q (want one of %s)", layout, strings.Join(layouts, ", "))
	}
	return opts, nil
}

// nodeSlices returns the slices one idle node publishes in the layout
// (spare: see layoutOptions).
func nodeSlices(node gpu.Node, sysfsRoot, driver, layout string, spare bool) ([]resourceslice.Slice, error) {
	opts, err := layoutOptions(driver, sysfsRoot, layout, spare)
	if err != nil {
		return nil, err
	}
	res, err := slicebuilder.Build(node, opts)
	if err != nil {
		return nil, err
	}
	pool := res.Pools[node.Name].Slices
	switch layout {
	case layoutNVIDIA:
		return nvidiaShaped(pool)
	case layoutEveryCounterSet:
		opts.SpareGPUs = slicebuilder.SpareGPUs{All: true}
		every, err := slicebuilder.Build(node, opts)
		if err != nil {
			return nil, err
		}
		pool = slices.Clone(pool)
		for i, s := range every.Pools[node.Name].Slices {
			if len(s.SharedCounters) > 0 {
				pool[i] = s
			}
		}
	}
	return pool, nil
}

// nvidiaShaped regroups gpudra's slices of one node: counter sets first
// (at most 8 per slice), then per GPU, in minor order, its whole device
// and its placements sorted by name.
func nvidiaShaped(pool []resourceslice.Slice) ([]resourceslice.Slice, error) {
	var sets []resourceapi.CounterSet
	perGPU := map[int][]resourceapi.Device{}
	for _, s := range pool {
		sets = append(sets, s.SharedCounters...)
		for _, d := range s.Devices {
			name, ok := gpu.ParseDeviceName(d.Name)
			if !ok {
				return nil, fmt.Errorf("device %q: not a gpudra device name", d.Name)
			}
			perGPU[name.Minor] = append(perGPU[name.Minor], d)
		}
	}
	var out []resourceslice.Slice
	for len(sets) > 0 {
		n := min(len(sets), resourceapi.ResourceSliceMaxCounterSets)
		out = append(out, resourceslice.Slice{SharedCounters: sets[:n:n]})
		sets = sets[n:]
	}
	minors := make([]int, 0, len(perGPU))
	for m := range perGPU {
		minors = append(minors, m)
	}
	slices.Sort(minors)
	for _, m := range minors {
		devs := perGPU[m]
		// "gpu-0" sorts before "gpu-0-mig-…": the whole GPU comes first.
		slices.SortFunc(devs, func(a, b resourceapi.Device) int { return strings.Compare(a.Name, b.Name) })
		if len(devs) > resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures {
			return nil, fmt.Errorf("GPU %d has %d devices, more than one slice holds", m, len(devs))
		}
		out = append(out, resourceslice.Slice{Devices: devs})
	}
	return out, nil
}

// sliceObjects turns one node's slices into the objects the ResourceSlice
// controller creates for them, named the way it names them: the index,
// zero-padded hex, then driver and node, then a random suffix. The
// allocator walks a pool's slices in name order, so the names keep the
// layout's order.
func sliceObjects(driver, nodeName string, pool []resourceslice.Slice) []*resourceapi.ResourceSlice {
	width := len(fmt.Sprintf("%x", max(len(pool)-1, 0)))
	out := make([]*resourceapi.ResourceSlice, 0, len(pool))
	for i, s := range pool {
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("%0*x-%s-%s-", width, i, driver, nodeName)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         driver,
				Pool:           resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: int64(len(pool))},
				NodeName:       &nodeName,
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		})
	}
	return out
}
