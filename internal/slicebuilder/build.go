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
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Options configure Build.
type Options struct {
	// DriverName is the DRA driver name (gpu.gpudra.io by default). It is
	// the domain of the unqualified attributes and of the health taint key.
	DriverName string
	// SysfsRoot is the host root under which /sys/bus/pci/devices/<busID>
	// resolves, exactly what backend.Backend.SysfsRoot returns: "/" (or "")
	// on a real node, a directory holding a fake sys/ tree under the fake
	// backend. It feeds the pcieRoot and numaNode attributes.
	SysfsRoot string
	// Health by GPU UUID. Only gpu.Unhealthy taints a device; a GPU that is
	// missing from the map counts as healthy.
	Health map[string]gpu.Health
	// AdminInstances are, by GPU UUID, the MIG instances that gpudra did
	// not create (an admin's, or another tool's). Their placements, any
	// placement they overlap and their whole GPU are not published, and
	// the GPU's counters shrink by their share.
	AdminInstances map[string][]gpu.MigInstance
	// InUse says, by GPU UUID, how the claims prepared on the node hold
	// the partitionable GPUs. A GPU held whole publishes none of its MIG
	// placements: none could be allocated while the claim holds the GPU
	// (the counters forbid it), but the scheduler would convert every
	// published device, for every claim it tries on the node. A GPU whose
	// partitions are held keeps its placements published. A GPU missing
	// from the map is unused.
	InUse map[string]gpu.Use
	// SpareGPUs is how many free GPUs publish their MIG placements beside
	// the partitioned ones (the zero value: DefaultSpareGPUs); see
	// Plan.
	SpareGPUs SpareGPUs
	// MigReady are the GPUs (by UUID) whose placements the previous
	// publish held, Plan's MigReady of the last call. A free GPU among
	// them stays published, whatever the spare count: the scheduler may
	// have allocated one of its placements to a claim that has not reached
	// the node yet, and a device taken out of the slices no longer counts
	// against its GPU's counters, so the GPU could be given twice. Nil
	// means nothing was published before.
	MigReady map[string]bool
	// WholeGPUsOnly publishes whole GPUs without counters or MIG
	// placements: for clusters that do not serve partitionable devices
	// (the API server drops the fields).
	WholeGPUsOnly bool
	// MigProfiles selects the MIG profiles published (the zero value: all).
	MigProfiles MigProfiles
	// ConsumableCapacity publishes whole GPUs that allow multiple
	// allocations, each claim taking a share of their memory and
	// multiprocessors (see shared.go).
	ConsumableCapacity bool
	// IMEXReady is whether the node's IMEX daemon answered READY when
	// last asked, published as AttrIMEXReady on the whole GPUs of a node
	// in an NVLink domain; nil where the plugin does not check the daemon
	// (no attribute).
	IMEXReady *bool
}

// Build describes a node's GPUs as the ResourceSlices that the kubelet
// plugin publishes (kubeletplugin.Helper.PublishResources); it is Plan's
// Resources.
func Build(node gpu.Node, opts Options) (resourceslice.DriverResources, error) {
	plan, err := Plan(node, opts)
	return plan.Resources, err
}

// Publication is what one node publishes.
type Publication struct {
	// Resources are the node's ResourceSlices.
	Resources resourceslice.DriverResources
	// MigReady are the GPUs (by UUID) whose MIG placements are published:
	// what the next Plan takes as Options.MigReady.
	MigReady map[string]bool
}

// Plan describes a node's GPUs as the ResourceSlices that the kubelet
// plugin publishes, and says which GPUs publish their MIG placements.
//
// There is one pool, named after the node. Devices are sorted by minor
// number, so the same hardware always gives the same slices, whatever
// order discovery listed it in: the ResourceSlice controller compares the
// result with what is stored, and any difference, reordering included, is
// an API write. The number of slices depends on the hardware and the
// options only, never on what is in use or healthy, so that a change of
// either rewrites slices in place and never starts a new pool generation
// (layout.go); the exception is fleet mode, where a node none of whose
// GPUs publishes MIG placements publishes a compact layout, without the
// empty slices but one (layout.go). The result is checked against the
// resource.k8s.io/v1 limits (see Validate): Plan fails rather than hand
// over slices the API server would reject.
//
// Which GPUs publish their MIG placements (readyGPUs): those whose
// partitions claims hold, those that can only be used as partitions (an
// admin's instances on them, or MIG mode on where turning it off needs a
// reset), those the previous publish held that are still free, and free
// GPUs, from the highest minor down, until SpareGPUs of them are healthy
// and free. Whole GPUs are always published.
func Plan(node gpu.Node, opts Options) (Publication, error) {
	if err := validateDriverName(opts.DriverName); err != nil {
		return Publication{}, err
	}
	if err := validatePoolName(node.Name); err != nil {
		return Publication{}, fmt.Errorf("node name: %w", err)
	}

	var layout poolLayout
	ready := map[string]bool{}
	if len(node.GPUs) > 0 {
		var err error
		layout, ready, err = buildLayout(node, opts)
		if err != nil {
			return Publication{}, fmt.Errorf("node %s: %w", node.Name, err)
		}
	}

	res := resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{node.Name: layout.pool()},
	}
	if err := Validate(opts.DriverName, res); err != nil {
		return Publication{}, err
	}
	return Publication{Resources: res, MigReady: ready}, nil
}

// wholeConsumption is where a partitionable GPU's whole device (-1: not
// published) and its counter set are in the layout, and what the whole
// device consumes.
type wholeConsumption struct {
	index int
	// counterSlot is the GPU's place in poolLayout.counterSets.
	counterSlot int
	consumes    []resourceapi.DeviceCounterConsumption
}

// buildLayout returns one device per usable whole GPU, in minor order,
// and for each partitionable GPU that is ready its counter set and its
// MIG placements.
func buildLayout(node gpu.Node, opts Options) (poolLayout, map[string]bool, error) {
	var layout poolLayout
	vers, err := newNodeVersions(node)
	if err != nil {
		return layout, nil, err
	}
	gpus := slices.Clone(node.GPUs)
	slices.SortStableFunc(gpus, func(a, b gpu.GPU) int { return a.Minor - b.Minor })

	domain := node.NVLinkDomain()
	var candidates []migCandidate
	var partitions []gpuPartitions
	var wholeOf []wholeConsumption
	for _, g := range gpus {
		health := opts.Health[g.UUID]
		shared, err := newGPUAttributes(g, vers, domain, opts.IMEXReady, opts.SysfsRoot)
		if err != nil {
			return layout, nil, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		d, err := wholeGPUDevice(g, shared, health, opts.DriverName)
		if err != nil {
			return layout, nil, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		if opts.ConsumableCapacity {
			makeShareable(&d)
		}
		monitor, err := monitorDevice(g, shared, opts.DriverName)
		if err != nil {
			return layout, nil, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		layout.monitors = append(layout.monitors, monitor)
		if opts.WholeGPUsOnly || !Partitionable(g) || !opts.MigProfiles.publishesAny(g.MIG) {
			layout.wholeGPUs = append(layout.wholeGPUs, d)
			continue
		}
		admin := opts.AdminInstances[g.UUID]
		mig := buildMIG(g, shared, admin, health, opts.DriverName, opts.MigProfiles)
		whole := -1
		if mig.wholeUsable {
			whole = len(layout.wholeGPUs)
			layout.wholeGPUs = append(layout.wholeGPUs, d)
		}
		slot := len(layout.counterSets)
		layout.counterSets = append(layout.counterSets, counterSlot{set: mig.counterSet})
		if len(mig.placements) == 0 {
			continue
		}
		candidates = append(candidates, migCandidate{
			uuid:     g.UUID,
			use:      opts.InUse[g.UUID],
			admin:    len(admin) > 0,
			onlyMIG:  !mig.wholeUsable,
			healthy:  health != gpu.Unhealthy,
			wasReady: opts.MigReady[g.UUID],
		})
		partitions = append(partitions, gpuPartitions{uuid: g.UUID, count: len(mig.placements), build: mig.devices})
		wholeOf = append(wholeOf, wholeConsumption{index: whole, counterSlot: slot, consumes: mig.wholeConsumes})
	}
	ready := readyGPUs(candidates, opts.SpareGPUs)
	// Fleet mode: a node that publishes no placements drops the empty
	// slices but one (layout.go, the compact layout).
	layout.compact = opts.SpareGPUs.Fleet && len(ready) == 0
	layout.addPartitions(partitions, wholeOf, ready)
	return layout, ready, nil
}

// addPartitions publishes the counter set of each ready GPU and makes its
// whole device consume it, and adds every partitionable GPU's placements,
// built for the ready ones.
func (l *poolLayout) addPartitions(partitions []gpuPartitions, wholeOf []wholeConsumption, ready map[string]bool) {
	// A GPU's counter set is published, and its whole device consumes
	// it, while its placements are published, so that the scheduler never
	// gives both. Otherwise there is nothing to share the GPU with: its
	// whole device consumes no counters (the allocator's allocated-devices
	// check alone keeps it exclusive) and no counter set is published, so
	// it costs the scheduler no counter conversion or check.
	for i, p := range partitions {
		if !ready[p.uuid] {
			continue
		}
		w := wholeOf[i]
		l.counterSets[w.counterSlot].published = true
		if w.index >= 0 {
			l.wholeGPUs[w.index].ConsumesCounters = w.consumes
		}
	}
	// Placements go last GPU first: the allocator walks slices in order,
	// first fit, and the spares are taken from the highest minor down, so
	// a partition claim lands on a GPU already partitioned before it
	// breaks into the next spare (whole-GPU claims take the lowest minors
	// first, from the whole-GPU slices).
	for i := len(partitions) - 1; i >= 0; i-- {
		p := partitions[i]
		if ready[p.uuid] {
			p.devices = p.build()
		}
		l.partitions = append(l.partitions, p)
	}
}
