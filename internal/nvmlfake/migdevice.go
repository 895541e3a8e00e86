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
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpudra/gpudra/internal/gpu"
)

// A MIG device is a compute instance seen as a device: NVML hands out a
// device handle for each, which answers a subset of the device queries
// for its slice of the GPU.

// installMigDevices sets the parent device's MIG device methods.
func (g *fakeGPU) installMigDevices() {
	g.dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) {
		if g.model.mig == nil || !g.migEnabled() {
			return 0, nvml.SUCCESS // "zero if MIG is not supported or enabled"
		}
		return int(g.model.mig.computeSlices), nvml.SUCCESS
	}
	g.dev.GetMigDeviceHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		if g.model.mig == nil {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		max, _ := g.dev.GetMaxMigDeviceCountFunc()
		if index < 0 || index >= max {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		devs, ret := g.migDevices()
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		if index >= len(devs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return devs[index], nvml.SUCCESS
	}
}

// migDevices lists the GPU's MIG devices in GPU instance, then compute
// instance ID order.
func (g *fakeGPU) migDevices() ([]*mock.Device, nvml.Return) {
	type pair struct {
		gi giState
		ci ciState
	}
	var pairs []pair
	if ret := g.view(func(gs *gpuState) {
		if gs.MigMode != nvml.DEVICE_MIG_ENABLE {
			return
		}
		for _, gi := range gs.GpuInstances {
			for _, ci := range gi.ComputeInstances {
				pairs = append(pairs, pair{gi, ci})
			}
		}
	}); ret != nvml.SUCCESS {
		return nil, ret
	}
	out := make([]*mock.Device, len(pairs))
	for i, p := range pairs {
		out[i] = g.migHandle(p.gi, p.ci)
	}
	return out, nvml.SUCCESS
}

// migHandle returns the MIG device handle of a compute instance.
func (g *fakeGPU) migHandle(gi giState, ci ciState) *mock.Device {
	key := ciKeyOf(g.giKey(gi), ci)
	return getOrBuild(&g.s.handles.mu, g.s.handles.migs, key, func() *mock.Device {
		h := &mock.Device{}
		g.installMigDevice(h, key, gi, ci)
		installMigTelemetry(h, g.s, migUUID(g.uuid, gi, ci))
		g.complete(h)
		return h
	})
}

// installMigDevice sets a MIG device handle's methods. Each fails with
// ERROR_INVALID_ARGUMENT once the compute instance is gone, like a stale
// handle on hardware.
func (g *fakeGPU) installMigDevice(h *mock.Device, key ciKey, gi giState, ci ciState) {
	gp, _ := g.model.mig.byID(gi.ProfileID)
	cp, _ := gp.computeByID(ci.ProfileID)
	uuid := migUUID(g.uuid, gi, ci)
	name := fmt.Sprintf("%s MIG %s", g.model.config.Name, migProfileName(g.model, gp, cp))
	memory := gp.info.MemorySizeMB << 20
	attrs := nvml.DeviceAttributes{
		MultiprocessorCount:       cp.info.MultiprocessorCount,
		SharedCopyEngineCount:     cp.info.SharedCopyEngineCount,
		SharedDecoderCount:        cp.info.SharedDecoderCount,
		SharedEncoderCount:        cp.info.SharedEncoderCount,
		SharedJpegCount:           cp.info.SharedJpegCount,
		SharedOfaCount:            cp.info.SharedOfaCount,
		GpuInstanceSliceCount:     gp.info.SliceCount,
		ComputeInstanceSliceCount: cp.info.SliceCount,
		MemorySizeMB:              gp.info.MemorySizeMB,
	}
	alive := func() nvml.Return {
		ok := false
		if r := g.view(func(gs *gpuState) { _, _, ok = lookupCI(gs, key) }); r != nvml.SUCCESS {
			return r
		}
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.SUCCESS
	}
	cfg := g.model.config
	h.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, alive() }
	h.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return g.dev, alive() }
	h.GetUUIDFunc = func() (string, nvml.Return) { return uuid, alive() }
	h.GetNameFunc = func() (string, nvml.Return) { return name, alive() }
	h.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(gi.ID), alive() }
	h.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return int(ci.ID), alive() }
	h.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: memory, Free: memory}, alive()
	}
	h.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return attrs, alive() }
	h.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return cfg.CudaMajor, cfg.CudaMinor, alive() }
	h.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return cfg.Architecture, alive() }
	h.GetBrandFunc = func() (nvml.BrandType, nvml.Return) { return cfg.Brand, alive() }
}

// migProfileName is the profile's name as nvidia-smi and the MIG device
// name spell it: "1g.10gb", "1g.10gb+me", "1c.3g.40gb".
func migProfileName(m *model, gp *giProfile, cp *ciProfile) string {
	gb := gpu.MigMemoryGB(gp.info.MemorySizeMB, m.config.MemoryMB<<20, int(m.mig.memorySlices))
	suffix := ""
	if gp.index == nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1 {
		suffix = "+me"
	}
	name := gpu.MigProfileName(int(gp.info.SliceCount), gb, suffix)
	if cp.info.SliceCount < gp.info.SliceCount {
		name = fmt.Sprintf("%dc.%s", cp.info.SliceCount, name)
	}
	return name
}

// migDeviceByUUID finds a MIG device of any GPU by its UUID.
func (s *Server) migDeviceByUUID(uuid string) (nvml.Device, bool) {
	for _, g := range s.gpus {
		if g.model.mig == nil {
			continue
		}
		devs, ret := g.migDevices()
		if ret != nvml.SUCCESS {
			continue
		}
		for _, d := range devs {
			if u, _ := d.GetUUIDFunc(); u == uuid {
				return d, true
			}
		}
	}
	return nil, false
}
