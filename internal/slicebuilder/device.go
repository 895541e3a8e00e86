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
	"math"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/gpu"
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

// wholeGPUAttributes is how many attributes a whole GPU can have: 4 of
// its own, the GPU's 8 that its MIG partitions share, the 3 standard
// topology ones, and the nvlinkDomainAttributes of a node in a multi-node
// NVLink domain.
const (
	nvlinkDomainAttributes = 5
	wholeGPUAttributes     = 15 + nvlinkDomainAttributes
)

// gpuAttributes are the attributes of a GPU that its whole device and its
// monitoring device share: the silicon (product, brand, architecture,
// compute capability, MIG capability), the node's driver, the NVLink
// island and domain, and the standard PCI and NUMA attributes, computed
// once per Build. Its MIG partitions carry PartitionParentAttributes of
// them, so that a selector written for NVIDIA's partitions that reads
// one evaluates on gpudra's: a missing attribute would be a run-time
// error, and one device's run-time error fails the whole allocation
// attempt in the scheduler.
type gpuAttributes struct {
	attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
}

// newGPUAttributes computes a GPU's shared attributes once per Build.
func newGPUAttributes(g gpu.GPU, vers nodeVersions, domain gpu.NVLinkDomain, imexReady *bool, sysfsRoot string) (gpuAttributes, error) {
	cc, err := NormalizeVersion(g.CUDAComputeCapability)
	if err != nil {
		return gpuAttributes{}, fmt.Errorf("CUDA compute capability: %w", err)
	}
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, wholeGPUAttributes-4)
	attrs[AttrProductName] = stringAttr(g.ProductName)
	attrs[AttrBrand] = stringAttr(g.Brand)
	attrs[AttrArchitecture] = stringAttr(g.Architecture)
	attrs[AttrCUDAComputeCapability] = versionAttr(cc)
	attrs[AttrDriverVersion] = versionAttr(vers.driver)
	attrs[AttrCUDADriverVersion] = versionAttr(vers.cudaDriver)
	attrs[AttrMigCapable] = boolAttr(g.MigCapable)
	attrs[AttrNVLinkGroup] = intAttr(int64(g.NVLinkGroup))
	addNVLinkDomainAttributes(attrs, g, domain, imexReady)
	if err := addTopologyAttributes(attrs, g.PCIBusID, sysfsRoot); err != nil {
		return gpuAttributes{}, err
	}
	return gpuAttributes{attrs: attrs}, nil
}

// addNVLinkDomainAttributes publishes the node's multi-node NVLink domain
// on its GPU, only when the node is in one (gpu.Node.NVLinkDomain decides):
// on every other node the GPU is published as before, and a selector
// tests for the domain with matchAttribute or has(), which a missing key
// does not fail. MIG partitions do not carry them: a job spanning nodes
// over NVLink takes whole GPUs, and every attribute is bytes in every
// slice; a prepared partition's metadata still names its GPU.
func addNVLinkDomainAttributes(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, g gpu.GPU, domain gpu.NVLinkDomain, imexReady *bool) {
	if !domain.InDomain() {
		return
	}
	if imexReady != nil {
		attrs[AttrIMEXReady] = boolAttr(*imexReady)
	}
	attrs[AttrNVLinkDomain] = stringAttr(domain.Name)
	attrs[AttrNVLinkClusterUUID] = stringAttr(domain.ClusterUUID)
	attrs[AttrNVLinkCliqueID] = intAttr(int64(domain.CliqueID))
	if g.Platform.Known {
		attrs[AttrTrayIndex] = intAttr(int64(g.Platform.TrayIndex))
	}
	if g.Platform.ModuleIDKnown {
		attrs[AttrModuleID] = intAttr(int64(g.Platform.ModuleID))
	}
}

// into copies the shared attributes into a device's map, each value
// copied, so that no device's attributes share pointers with another's.
func (a gpuAttributes) into(dst map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) {
	for k, v := range a.attrs {
		dst[k] = *v.DeepCopy()
	}
}

// wholeGPUDevice describes one physical GPU as a device of type TypeGPU.
//
// Attributes that every whole GPU has are always published, even when their
// value is an empty string: a selector on a key that some devices lack
// fails with a runtime error on those devices, which fails the whole
// allocation attempt, whereas a comparison with "" is just false.
func wholeGPUDevice(g gpu.GPU, shared gpuAttributes, health gpu.Health, driverName string) (resourceapi.Device, error) {
	return gpuDevice(g, shared, g.DeviceName(), TypeGPU, healthTaints(driverName, health))
}

// gpuDevice is a device with every attribute and capacity of the whole GPU
// g, under the given name and type: the whole GPU itself, or its
// monitoring device.
func gpuDevice(g gpu.GPU, shared gpuAttributes, name, typ string, taints []resourceapi.DeviceTaint) (resourceapi.Device, error) {
	// Sized for every attribute a whole GPU can have, so that adding the
	// shared ones does not grow the map: Build runs on every publish.
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, wholeGPUAttributes)
	attrs[AttrType] = stringAttr(typ)
	attrs[AttrUUID] = stringAttr(g.UUID)
	attrs[AttrIndex] = intAttr(int64(g.Index))
	attrs[AttrMinor] = intAttr(int64(g.Minor))
	shared.into(attrs)

	capacity, err := gpuCapacity(g)
	if err != nil {
		return resourceapi.Device{}, err
	}
	return resourceapi.Device{
		Name:       name,
		Attributes: attrs,
		Capacity:   capacity,
		Taints:     taints,
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
