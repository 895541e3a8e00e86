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

package gpu

import "fmt"

// Node is the inventory of one node: what discovery found through NVML.
type Node struct {
	// Name is the Kubernetes node name; it is also the ResourceSlice pool name.
	Name string
	// DriverVersion is the NVIDIA kernel driver version as NVML reports it
	// (e.g. "550.54.15").
	DriverVersion string
	// CUDADriverVersion is the CUDA version the driver supports, "major.minor"
	// (e.g. "12.4").
	CUDADriverVersion string
	// GPUs in index order.
	GPUs []GPU
}

// GPU is one physical GPU.
type GPU struct {
	// Index is NVML's enumeration index; it can change across reboots when
	// GPUs are added or removed, so nothing persistent is keyed by it.
	Index int
	// Minor is the minor number of /dev/nvidia<minor>; the device name is
	// derived from it because it is stable for a given PCI slot.
	Minor int
	// UUID is the GPU's unique ID ("GPU-…"), the key used in checkpoints and
	// NVIDIA_VISIBLE_DEVICES.
	UUID string
	// ProductName as NVML reports it, e.g. "NVIDIA H100 80GB HBM3".
	ProductName string
	// Brand, e.g. "Nvidia", "Tesla".
	Brand string
	// Architecture, e.g. "Ampere", "Hopper", "Blackwell".
	Architecture string
	// CUDAComputeCapability is "major.minor", e.g. "9.0".
	CUDAComputeCapability string
	// MemoryBytes is the total framebuffer memory.
	MemoryBytes uint64
	// Multiprocessors is the number of streaming multiprocessors; zero when
	// NVML cannot tell.
	Multiprocessors int
	// MigCapable is true when the GPU supports MIG partitioning.
	MigCapable bool
	// MigEnabled is the current MIG mode.
	MigEnabled bool
	// MIG is what MIG offers on this GPU (profiles, placements, existing
	// instances); nil for a GPU without MIG.
	MIG *MIG
	// NVLinkGroup identifies the NVLink island the GPU belongs to: GPUs with
	// the same value are connected by NVLink (directly or through NVSwitch).
	// It is the lowest index in the island, so a GPU without NVLink peers is
	// its own island.
	NVLinkGroup int
	// PCIBusID is the canonical PCI address, lower case, with a 4-digit
	// domain: "0000:1b:00.0".
	PCIBusID string
	// Fabric is the GPU's multi-node NVLink fabric reading; Node.NVLinkDomain
	// decides from all GPUs' whether the node is in a domain.
	Fabric Fabric
	// Platform is where the GPU sits in its rack and on its board.
	Platform Platform
}

// DeviceName is the name of the whole-GPU device in the ResourceSlice.
func (g GPU) DeviceName() string { return WholeDeviceName(g.Minor) }

// WholeDeviceName returns "gpu-<minor>".
func WholeDeviceName(minor int) string { return fmt.Sprintf("gpu-%d", minor) }

// MonitorDeviceName returns "gpu-<minor>-monitor": the device a monitoring
// pod (DRA admin access) gets for the GPU. It consumes none of the GPU's
// counters, so it can be allocated whatever runs on the GPU.
func MonitorDeviceName(minor int) string { return fmt.Sprintf("gpu-%d-monitor", minor) }

// MonitorDeviceName is the name of the GPU's monitoring device.
func (g GPU) MonitorDeviceName() string { return MonitorDeviceName(g.Minor) }

// GPUByMonitorName returns the GPU whose monitoring device has the given
// name.
func (n Node) GPUByMonitorName(name string) (GPU, bool) {
	for _, g := range n.GPUs {
		if g.MonitorDeviceName() == name {
			return g, true
		}
	}
	return GPU{}, false
}

// GPUByUUID returns the GPU with the given UUID.
func (n Node) GPUByUUID(uuid string) (GPU, bool) {
	for _, g := range n.GPUs {
		if g.UUID == uuid {
			return g, true
		}
	}
	return GPU{}, false
}

// GPUByDeviceName returns the GPU published under the given whole-GPU device
// name.
func (n Node) GPUByDeviceName(name string) (GPU, bool) {
	for _, g := range n.GPUs {
		if g.DeviceName() == name {
			return g, true
		}
	}
	return GPU{}, false
}
