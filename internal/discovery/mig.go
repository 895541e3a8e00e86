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
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
)

// profileSuffix is the variant suffix of a GPU instance profile index, as
// nvidia-smi prints it.
func profileSuffix(index int) string {
	switch index {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		return "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		return "+gfx"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		return "-me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		return "+me.all"
	default:
		return ""
	}
}

// migInfo reads a MIG-capable GPU's profiles, their possible placements
// (which NVML answers whether or not MIG mode is on) and, with MIG mode
// on, the GPU and compute instances that exist.
func migInfo(d nvml.Device, arch nvml.DeviceArchitecture, totalMemory uint64, migEnabled bool) (*gpu.MIG, error) {
	m := &gpu.MIG{ModeChangeNeedsReset: arch <= nvml.DEVICE_ARCH_AMPERE || arch == nvml.DEVICE_ARCH_UNKNOWN}
	var infos []nvml.GpuInstanceProfileInfo
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := d.GetGpuInstanceProfileInfo(index)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			return nil, fmt.Errorf("get GPU instance profile %d: %w", index, ret)
		}
		pls, ret := d.GetGpuInstancePossiblePlacements(&info)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED:
			continue
		default:
			return nil, fmt.Errorf("get placements of GPU instance profile %d: %w", index, ret)
		}
		p := gpu.MigProfile{
			ID:              info.Id,
			Index:           index,
			ComputeSlices:   int(info.SliceCount),
			InstanceCount:   int(info.InstanceCount),
			MemoryBytes:     info.MemorySizeMB << 20,
			Multiprocessors: int(info.MultiprocessorCount),
			CopyEngines:     int(info.CopyEngineCount),
			Decoders:        int(info.DecoderCount),
			Encoders:        int(info.EncoderCount),
			JPEGEngines:     int(info.JpegCount),
			OFAEngines:      int(info.OfaCount),
		}
		for _, pl := range pls {
			p.Placements = append(p.Placements, gpu.MigPlacement{Start: int(pl.Start), Size: int(pl.Size)})
			m.MemorySlices = max(m.MemorySlices, int(pl.Start+pl.Size))
		}
		m.ComputeSlices = max(m.ComputeSlices, p.ComputeSlices)
		m.Profiles = append(m.Profiles, p)
		infos = append(infos, info)
	}
	for i := range m.Profiles {
		p := &m.Profiles[i]
		gb := gpu.MigMemoryGB(infos[i].MemorySizeMB, totalMemory, m.MemorySlices)
		p.Name = gpu.MigProfileName(p.ComputeSlices, gb, profileSuffix(p.Index))
	}
	if !migEnabled {
		return m, nil
	}
	var err error
	m.Instances, err = MigInstances(d)
	return m, err
}

// describeInstance reads a GPU instance and its compute instances.
func describeInstance(gi nvml.GpuInstance) (gpu.MigInstance, error) {
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return gpu.MigInstance{}, fmt.Errorf("get GPU instance info: %w", ret)
	}
	inst := gpu.MigInstance{
		GIID:      int(info.Id),
		ProfileID: info.ProfileId,
		Placement: gpu.MigPlacement{Start: int(info.Placement.Start), Size: int(info.Placement.Size)},
	}
	cis, err := ComputeInstances(gi)
	if err != nil {
		return inst, fmt.Errorf("GPU instance %d: %w", inst.GIID, err)
	}
	for _, ci := range cis {
		ciInfo, ret := ci.GetInfo()
		if ret != nvml.SUCCESS {
			return inst, fmt.Errorf("GPU instance %d: get compute instance info: %w", inst.GIID, ret)
		}
		inst.ComputeInstances = append(inst.ComputeInstances, int(ciInfo.Id))
	}
	slices.Sort(inst.ComputeInstances)
	return inst, nil
}

// ComputeInstances lists every compute instance of a GPU instance, of any
// compute instance profile.
func ComputeInstances(gi nvml.GpuInstance) ([]nvml.ComputeInstance, error) {
	var out []nvml.ComputeInstance
	for p := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		info, ret := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			return nil, fmt.Errorf("get compute instance profile %d: %w", p, ret)
		}
		cis, ret := gi.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("list compute instances of profile %d: %w", p, ret)
		}
		out = append(out, cis...)
	}
	return out, nil
}

// MigInstances lists the GPU instances that exist on a GPU, in ID order;
// none when MIG mode is off or the GPU has no MIG.
func MigInstances(d nvml.Device) ([]gpu.MigInstance, error) {
	current, _, ret := d.GetMigMode()
	if ret == nvml.ERROR_NOT_SUPPORTED || (ret == nvml.SUCCESS && current != nvml.DEVICE_MIG_ENABLE) {
		return nil, nil
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get MIG mode: %w", ret)
	}
	var out []gpu.MigInstance
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := d.GetGpuInstanceProfileInfo(index)
		if ret != nvml.SUCCESS {
			continue
		}
		gis, ret := d.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("list GPU instances of profile %d: %w", info.Id, ret)
		}
		for _, gi := range gis {
			inst, err := describeInstance(gi)
			if err != nil {
				return nil, err
			}
			out = append(out, inst)
		}
	}
	slices.SortFunc(out, func(a, b gpu.MigInstance) int { return a.GIID - b.GIID })
	return out, nil
}
