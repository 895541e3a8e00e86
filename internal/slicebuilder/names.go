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
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// Attribute names that gpudra publishes. The unqualified ones live in the
// driver's own domain (the driver name, gpu.gpudra.io by default), so a
// selector reads them as device.attributes['gpu.gpudra.io'].<name>. They are
// the one list that the kubelet plugin, the CEL harness, the DeviceClasses
// and the docs (doc.go) agree on: rename one here and everything follows.
const (
	// AttrType tells whole GPUs and MIG partitions apart (TypeGPU, or "mig"
	// once MIG placements are published), so that one selector can guard
	// attributes that only one kind of device carries.
	AttrType resourceapi.QualifiedName = "type"
	// AttrUUID is NVML's GPU UUID ("GPU-…").
	AttrUUID resourceapi.QualifiedName = "uuid"
	// AttrIndex is NVML's enumeration index; it can change across reboots.
	AttrIndex resourceapi.QualifiedName = "index"
	// AttrMinor is the minor number of /dev/nvidia<minor>.
	AttrMinor resourceapi.QualifiedName = "minor"
	// AttrProductName is NVML's product name, e.g. "NVIDIA H100 80GB HBM3".
	AttrProductName resourceapi.QualifiedName = "productName"
	// AttrBrand is NVML's brand, e.g. "Nvidia", "Tesla".
	AttrBrand resourceapi.QualifiedName = "brand"
	// AttrArchitecture is e.g. "Ampere", "Hopper", "Blackwell".
	AttrArchitecture resourceapi.QualifiedName = "architecture"
	// AttrCUDAComputeCapability is a version ("9.0" is published as 9.0.0).
	AttrCUDAComputeCapability resourceapi.QualifiedName = "cudaComputeCapability"
	// AttrDriverVersion is the NVIDIA kernel driver version as semver.
	AttrDriverVersion resourceapi.QualifiedName = "driverVersion"
	// AttrCUDADriverVersion is the newest CUDA version the driver supports.
	AttrCUDADriverVersion resourceapi.QualifiedName = "cudaDriverVersion"
	// AttrMigCapable is true when the GPU can be partitioned with MIG.
	AttrMigCapable resourceapi.QualifiedName = "migCapable"
	// AttrNVLinkGroup identifies the NVLink island; use it with
	// matchAttribute to get NVLink-connected GPUs.
	AttrNVLinkGroup resourceapi.QualifiedName = "nvlinkGroup"

	// The standard attributes are defined by Kubernetes, so that
	// matchAttribute can align GPUs with NICs and other devices of other
	// drivers. They are fully qualified and computed by deviceattribute.
	AttrPCIBusID = deviceattribute.StandardDeviceAttributePCIBusID
	AttrPCIeRoot = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrNUMANode = deviceattribute.StandardDeviceAttributeNUMANode
)

// Capacity names. Memory is a capacity, not an attribute, so that selectors
// compare quantities (compareTo(quantity('40Gi'))) and, later, consumable
// capacity can draw from it.
const (
	// CapMemory is the framebuffer size in bytes.
	CapMemory resourceapi.QualifiedName = "memory"
	// CapMultiprocessors is the number of streaming multiprocessors.
	CapMultiprocessors resourceapi.QualifiedName = "multiprocessors"
)

// TypeGPU is the value of AttrType on a whole GPU.
const TypeGPU = "gpu"

// UnhealthyTaintValue is the value of the health taint. It names no cause on
// purpose: a cause that changes from one XID to the next would turn every
// new error on an already unhealthy GPU into an API write.
const UnhealthyTaintValue = "unhealthy"

// UnhealthyTaintKey is the device-taint key that marks an unhealthy GPU:
// "<driver name>/unhealthy", e.g. "gpu.gpudra.io/unhealthy". The domain comes
// from the driver name so that two gpudra instances with different names
// (side by side, or beside another GPU driver) never share taint keys, and a
// toleration names the driver it means.
func UnhealthyTaintKey(driverName string) string {
	return driverName + "/unhealthy"
}
