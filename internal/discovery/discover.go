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

package discovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Discover describes the node's GPUs, in NVML index order.
func Discover(ctx context.Context, lib nvml.Interface, nodeName string) (gpu.Node, error) {
	logger := klog.FromContext(ctx)
	node := gpu.Node{Name: nodeName}

	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return gpu.Node{}, fmt.Errorf("get driver version: %w", ret)
	}
	node.DriverVersion = driver
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return gpu.Node{}, fmt.Errorf("get CUDA driver version: %w", ret)
	}
	node.CUDADriverVersion = cudaVersion(cuda)

	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return gpu.Node{}, fmt.Errorf("count GPUs: %w", ret)
	}
	devices := make([]nvml.Device, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return gpu.Node{}, err
		}
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret == nvml.ERROR_GPU_IS_LOST {
			// One GPU off the bus must not take the node's other GPUs
			// with it: it is not published, and the rest are.
			logger.Error(ret, "GPU has fallen off the bus; not publishing it (a reboot may bring it back)", "index", i)
			continue
		}
		if ret != nvml.SUCCESS {
			return gpu.Node{}, fmt.Errorf("GPU %d: get handle: %w", i, ret)
		}
		g, err := describe(ctx, i, d)
		if err == nil {
			err = fabricAndPlatform(ctx, lib, d, &g)
		}
		if errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
			logger.Error(err, "GPU fell off the bus while being discovered; not publishing it", "index", i)
			continue
		}
		if err != nil {
			return gpu.Node{}, fmt.Errorf("GPU %d: %w", i, err)
		}
		devices = append(devices, d)
		node.GPUs = append(node.GPUs, g)
	}
	for i, group := range nvlinkGroups(ctx, devices) {
		node.GPUs[i].NVLinkGroup = group
	}
	logger.V(4).Info("Discovered GPUs", "count", len(node.GPUs), "driver", node.DriverVersion, "cuda", node.CUDADriverVersion,
		"nvlinkDomain", node.NVLinkDomain().Name)
	return node, nil
}

// describe reads one GPU's identity and capabilities; NVLinkGroup is
// filled by the caller, which sees all GPUs.
func describe(ctx context.Context, index int, d nvml.Device) (gpu.GPU, error) {
	g := gpu.GPU{Index: index}
	var ret nvml.Return
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("get UUID: %w", ret)
	}
	if g.Minor, ret = d.GetMinorNumber(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("get minor number: %w", ret)
	}
	if g.ProductName, ret = d.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("get name: %w", ret)
	}
	brand, ret := d.GetBrand()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get brand: %w", ret)
	}
	g.Brand = brandName(brand)
	arch, ret := d.GetArchitecture()
	switch ret {
	case nvml.SUCCESS:
		g.Architecture = architectureName(arch)
	case nvml.ERROR_NOT_SUPPORTED: // GPUs older than the query
		g.Architecture = architectureName(nvml.DEVICE_ARCH_UNKNOWN)
	default:
		return g, fmt.Errorf("get architecture: %w", ret)
	}
	major, minor, ret := d.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get CUDA compute capability: %w", ret)
	}
	g.CUDAComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get memory: %w", ret)
	}
	g.MemoryBytes = mem.Total
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get PCI info: %w", ret)
	}
	busID, err := pciBusID(pci)
	if err != nil {
		return g, err
	}
	g.PCIBusID = busID

	current, _, ret := d.GetMigMode()
	switch ret {
	case nvml.SUCCESS:
		g.MigCapable, g.MigEnabled = true, current == nvml.DEVICE_MIG_ENABLE
		if g.MIG, err = migInfo(d, arch, g.MemoryBytes, g.MigEnabled); err != nil {
			return g, err
		}
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return g, fmt.Errorf("get MIG mode: %w", ret)
	}
	if g.Multiprocessors, err = multiprocessors(ctx, d, major, minor, g.MigEnabled); err != nil {
		return g, err
	}
	return g, nil
}

// cudaVersion turns NVML's 12040 into "12.4".
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}
