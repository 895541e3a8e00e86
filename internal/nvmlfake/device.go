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

package nvmlfake

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeGPU is one whole GPU. Its handle is the go-nvml mock device, whose
// methods the fake replaces with the ones below.
type fakeGPU struct {
	s     *Server
	dev   *server.Device
	index int
	model *model
	uuid  string
	// bus is the PCI bus number; domain, device and function are 0.
	bus  int
	pcie PCIeSlot
	// island is the NVLink island (noIsland for none), nvlinkPeers the
	// number of other GPUs in it.
	island      int
	nvlinkPeers int
}

// install sets the handle's methods: identity, topology, MIG and events.
func (g *fakeGPU) install() {
	d, cfg := g.dev, g.model.config
	d.GetUUIDFunc = func() (string, nvml.Return) { return g.uuid, nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return cfg.Name, nvml.SUCCESS }
	d.GetBrandFunc = func() (nvml.BrandType, nvml.Return) { return cfg.Brand, nvml.SUCCESS }
	d.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return cfg.Architecture, nvml.SUCCESS }
	d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return cfg.CudaMajor, cfg.CudaMinor, nvml.SUCCESS }
	d.GetIndexFunc = func() (int, nvml.Return) { return g.index, nvml.SUCCESS }
	d.GetMinorNumberFunc = func() (int, nvml.Return) { return g.index, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		total := cfg.MemoryMB << 20
		return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		total := cfg.MemoryMB << 20
		return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: total, Free: total}, nvml.SUCCESS
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return g.pciInfo(), nvml.SUCCESS }
	d.GetNumGpuCoresFunc = g.numGpuCores
	d.GetNvLinkStateFunc = g.nvLinkState
	d.GetP2PStatusFunc = g.p2pStatus
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }

	g.installMigMode()
	g.installGpuInstances()
	g.installMigDevices()
	g.installComputePolicy()
	g.installEvents()
	g.installTelemetry()
	g.installRecovery()
	g.installFabric()

	// Fields the mock's own methods read; set for anyone who looks.
	d.UUID, d.PciBusID, d.Minor, d.Index = g.uuid, nvmlBusID(g.bus), g.index, g.index
	g.complete(d)
}

// pciInfo is what nvmlDeviceGetPciInfo fills: both bus ID spellings,
// the address split into fields, and the device and board IDs.
func (g *fakeGPU) pciInfo() nvml.PciInfo {
	p := nvml.PciInfo{
		Domain:         0,
		Bus:            uint32(g.bus),
		Device:         0,
		PciDeviceId:    g.model.config.PciDeviceId,
		PciSubSystemId: g.model.subsystemID,
	}
	putCString(p.BusIdLegacy[:], nvmlBusID(g.bus)[4:]) // 4-digit domain
	putCString(p.BusId[:], nvmlBusID(g.bus))
	return p
}

// putCString copies s into a NUL-terminated C char array.
func putCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// numGpuCores is NOT_SUPPORTED while MIG is on: NVML says to ask the GPU
// instance profiles instead, and discovery must cope with that.
func (g *fakeGPU) numGpuCores() (int, nvml.Return) {
	if g.migEnabled() {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return g.model.sms * g.model.coresPerSM, nvml.SUCCESS
}

// nvLinkState: the links of a GPU with NVLink peers are up; a GPU alone
// in its island has its links down; a PCIe card has none.
func (g *fakeGPU) nvLinkState(link int) (nvml.EnableState, nvml.Return) {
	if g.model.nvlinks == 0 {
		return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
	}
	if link < 0 || link >= g.model.nvlinks {
		return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
	}
	if g.nvlinkPeers > 0 {
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	return nvml.FEATURE_DISABLED, nvml.SUCCESS
}

// p2pStatus answers for a pair of GPUs: NVLink (and atomics) only within
// an island; PCIe reads and writes only below the same root complex.
func (g *fakeGPU) p2pStatus(other nvml.Device, index nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
	o, ok := g.s.gpuByHandle(other)
	if !ok || index < nvml.P2P_CAPS_INDEX_READ || index >= nvml.P2P_CAPS_INDEX_UNKNOWN {
		return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
	}
	if o == g {
		return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
	}
	nvlinked := g.island != noIsland && g.island == o.island
	samePCIeRoot := g.pcie.RootComplex == o.pcie.RootComplex
	status := func(ok bool, otherwise nvml.GpuP2PStatus) (nvml.GpuP2PStatus, nvml.Return) {
		if ok {
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
		return otherwise, nvml.SUCCESS
	}
	switch index {
	case nvml.P2P_CAPS_INDEX_NVLINK, nvml.P2P_CAPS_INDEX_ATOMICS:
		return status(nvlinked, nvml.P2P_STATUS_NOT_SUPPORTED)
	case nvml.P2P_CAPS_INDEX_PCI:
		return status(samePCIeRoot, nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED)
	default: // read, write
		return status(nvlinked || samePCIeRoot, nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED)
	}
}
