package slicebuilder

import (
	"fmt"
	"slices"

	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/pkg/gpu"
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
	// placements, and one whose partitions are held publishes no whole
	// device: neither could be allocated while the claims hold the GPU
	// (the counters forbid it), but the scheduler would convert every
	// published device and evaluate the claim's CEL on it, for every claim
	// it tries on the node. The devices keep their slices, so a change
	// rewrites one slice. A GPU missing from the map is unused.
	InUse map[string]gpu.Use
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
}

// Build describes a node's GPUs as the ResourceSlices that the kubelet
// plugin publishes (kubeletplugin.Helper.PublishResources).
//
// There is one pool, named after the node. Devices are sorted by minor
// number, so the same hardware always gives the same slices, whatever
// order discovery listed it in: the ResourceSlice controller compares the
// result with what is stored, and any difference, reordering included, is
// an API write. The result is checked against the resource.k8s.io/v1
// limits (see Validate): Build fails rather than hand over slices the API
// server would reject.
func Build(node gpu.Node, opts Options) (resourceslice.DriverResources, error) {
	if err := validateDriverName(opts.DriverName); err != nil {
		return resourceslice.DriverResources{}, err
	}
	if err := validatePoolName(node.Name); err != nil {
		return resourceslice.DriverResources{}, fmt.Errorf("node name: %w", err)
	}

	var layout poolLayout
	if len(node.GPUs) > 0 {
		var err error
		layout, err = buildLayout(node, opts)
		if err != nil {
			return resourceslice.DriverResources{}, fmt.Errorf("node %s: %w", node.Name, err)
		}
	}

	res := resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{node.Name: layout.pool()},
	}
	if err := Validate(opts.DriverName, res); err != nil {
		return resourceslice.DriverResources{}, err
	}
	return res, nil
}

// buildLayout returns one device per usable whole GPU, in minor order,
// and for each partitionable GPU its counter set and MIG placements.
func buildLayout(node gpu.Node, opts Options) (poolLayout, error) {
	var layout poolLayout
	vers, err := newNodeVersions(node)
	if err != nil {
		return layout, err
	}
	gpus := slices.Clone(node.GPUs)
	slices.SortStableFunc(gpus, func(a, b gpu.GPU) int { return a.Minor - b.Minor })

	for _, g := range gpus {
		health := opts.Health[g.UUID]
		shared, err := newGPUAttributes(g, vers, opts.SysfsRoot)
		if err != nil {
			return layout, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		d, err := wholeGPUDevice(g, shared, health, opts.DriverName)
		if err != nil {
			return layout, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		if opts.ConsumableCapacity {
			makeShareable(&d)
		}
		monitor, err := monitorDevice(g, shared, opts.DriverName)
		if err != nil {
			return layout, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		layout.monitors = append(layout.monitors, monitor)
		if opts.WholeGPUsOnly || !Partitionable(g) || !opts.MigProfiles.publishesAny(g.MIG) {
			layout.wholeGPUs = append(layout.wholeGPUs, d)
			continue
		}
		mig, err := buildMIG(g, shared, opts.AdminInstances[g.UUID], health, opts.DriverName, opts.MigProfiles)
		if err != nil {
			return layout, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		use := opts.InUse[g.UUID]
		if mig.wholeUsable && use != gpu.UsedByMIG {
			d.ConsumesCounters = mig.wholeConsumes
			layout.wholeGPUs = append(layout.wholeGPUs, d)
		}
		layout.counterSets = append(layout.counterSets, mig.counterSet)
		if len(mig.placements) > 0 {
			layout.partitions = append(layout.partitions, mig.placements)
			layout.partitionsHidden = append(layout.partitionsHidden, use == gpu.UsedWhole)
		}
	}
	return layout, nil
}
