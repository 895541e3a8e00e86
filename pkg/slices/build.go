package slices

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
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
		devices, err := wholeGPUDevices(node, opts)
		if err != nil {
			return resourceslice.DriverResources{}, fmt.Errorf("node %s: %w", node.Name, err)
		}
		layout.wholeGPUs = devices
	}

	res := resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{node.Name: layout.pool()},
	}
	if err := Validate(opts.DriverName, res); err != nil {
		return resourceslice.DriverResources{}, err
	}
	return res, nil
}

// wholeGPUDevices returns one device per GPU, in minor order.
func wholeGPUDevices(node gpu.Node, opts Options) ([]resourceapi.Device, error) {
	vers, err := newNodeVersions(node)
	if err != nil {
		return nil, err
	}
	gpus := slices.Clone(node.GPUs)
	slices.SortStableFunc(gpus, func(a, b gpu.GPU) int { return a.Minor - b.Minor })

	devices := make([]resourceapi.Device, 0, len(gpus))
	for _, g := range gpus {
		d, err := wholeGPUDevice(g, vers, opts.Health[g.UUID], opts.DriverName, opts.SysfsRoot)
		if err != nil {
			return nil, fmt.Errorf("GPU %s (minor %d): %w", g.UUID, g.Minor, err)
		}
		devices = append(devices, d)
	}
	return devices, nil
}
