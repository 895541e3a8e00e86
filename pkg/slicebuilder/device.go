package slicebuilder

import (
	"fmt"
	"math"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// nodeVersions are the node-wide versions every whole GPU carries,
// normalized once per Build.
type nodeVersions struct {
	driver     string
	cudaDriver string
}

func newNodeVersions(node gpu.Node) (nodeVersions, error) {
	driver, err := NormalizeVersion(node.DriverVersion)
	if err != nil {
		return nodeVersions{}, fmt.Errorf("driver version: %w", err)
	}
	cuda, err := NormalizeVersion(node.CUDADriverVersion)
	if err != nil {
		return nodeVersions{}, fmt.Errorf("CUDA driver version: %w", err)
	}
	return nodeVersions{driver: driver, cudaDriver: cuda}, nil
}

// wholeGPUAttributes is how many attributes a whole GPU can have: 12 of
// its own and the 3 standard topology ones.
const wholeGPUAttributes = 15

// wholeGPUDevice describes one physical GPU as a device of type TypeGPU.
//
// Attributes that every whole GPU has are always published, even when their
// value is an empty string: a selector on a key that some devices lack
// fails with a runtime error on those devices, which fails the whole
// allocation attempt, whereas a comparison with "" is just false.
func wholeGPUDevice(g gpu.GPU, vers nodeVersions, health gpu.Health, driverName, sysfsRoot string) (resourceapi.Device, error) {
	cc, err := NormalizeVersion(g.CUDAComputeCapability)
	if err != nil {
		return resourceapi.Device{}, fmt.Errorf("CUDA compute capability: %w", err)
	}
	// Sized for every attribute a whole GPU can have, so that adding the
	// topology ones does not grow the map: Build runs on every resync.
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, wholeGPUAttributes)
	attrs[AttrType] = stringAttr(TypeGPU)
	attrs[AttrUUID] = stringAttr(g.UUID)
	attrs[AttrIndex] = intAttr(int64(g.Index))
	attrs[AttrMinor] = intAttr(int64(g.Minor))
	attrs[AttrProductName] = stringAttr(g.ProductName)
	attrs[AttrBrand] = stringAttr(g.Brand)
	attrs[AttrArchitecture] = stringAttr(g.Architecture)
	attrs[AttrCUDAComputeCapability] = versionAttr(cc)
	attrs[AttrDriverVersion] = versionAttr(vers.driver)
	attrs[AttrCUDADriverVersion] = versionAttr(vers.cudaDriver)
	attrs[AttrMigCapable] = boolAttr(g.MigCapable)
	attrs[AttrNVLinkGroup] = intAttr(int64(g.NVLinkGroup))
	if err := addTopologyAttributes(attrs, g.PCIBusID, sysfsRoot); err != nil {
		return resourceapi.Device{}, err
	}

	capacity, err := gpuCapacity(g)
	if err != nil {
		return resourceapi.Device{}, err
	}
	return resourceapi.Device{
		Name:       g.DeviceName(),
		Attributes: attrs,
		Capacity:   capacity,
		Taints:     healthTaints(driverName, health),
	}, nil
}

// gpuCapacity returns memory (always) and multiprocessors (when known).
// Memory uses BinarySI so that it prints as e.g. 80Gi; multiprocessors is a
// plain count. A zero multiprocessor count means NVML could not tell, and
// publishing 0 would make "at least N SMs" selectors reject a GPU that has
// them.
func gpuCapacity(g gpu.GPU) (map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, error) {
	if g.MemoryBytes > math.MaxInt64 {
		return nil, fmt.Errorf("memory %d bytes does not fit a quantity", g.MemoryBytes)
	}
	capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		CapMemory: {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
	}
	if g.Multiprocessors > 0 {
		capacity[CapMultiprocessors] = resourceapi.DeviceCapacity{
			Value: *resource.NewQuantity(int64(g.Multiprocessors), resource.DecimalSI),
		}
	}
	return capacity, nil
}

func stringAttr(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: &s}
}

func versionAttr(v string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: &v}
}

func intAttr(i int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: &i}
}

func boolAttr(b bool) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{BoolValue: &b}
}
