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

package backend

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
)

var (
	// ErrResetRequired: the MIG mode change takes effect at the next GPU
	// reset.
	ErrResetRequired = errors.New("the MIG mode change needs a GPU reset")
	// ErrInsufficientResources: the placement is taken.
	ErrInsufficientResources = errors.New("insufficient resources")
)

// device returns the handle of the GPU with the given UUID. A GPU that is
// not there any more is an error wrapping gpu.ErrGPUGone.
func (l library) device(uuid string) (nvml.Device, error) {
	d, ret := l.lib.DeviceGetHandleByUUID(uuid)
	switch ret {
	case nvml.SUCCESS:
		return d, nil
	case nvml.ERROR_NOT_FOUND:
		return nil, fmt.Errorf("GPU %s: get handle: %w: %w", uuid, ret, gpu.ErrGPUGone)
	case nvml.ERROR_GPU_IS_LOST:
		// nvml.h says a lookup by UUID fails so "if any GPU has fallen
		// off the bus": find out whether it is this one.
		return l.deviceByIndexScan(uuid)
	}
	return nil, fmt.Errorf("GPU %s: get handle: %w", uuid, ret)
}

// deviceByIndexScan looks for the GPU among the handles by index, which
// fail only for the lost GPU itself: if no reachable GPU has the UUID, it
// is the lost one (or gone altogether).
func (l library) deviceByIndexScan(uuid string) (nvml.Device, error) {
	count, ret := l.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU %s: get handle: ERROR_GPU_IS_LOST, and counting GPUs: %w", uuid, ret)
	}
	for i := range count {
		d, ret := l.lib.DeviceGetHandleByIndex(i)
		if ret == nvml.ERROR_GPU_IS_LOST {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: get handle: ERROR_GPU_IS_LOST, and GPU %d: %w", uuid, i, ret)
		}
		if u, ret := d.GetUUID(); ret == nvml.SUCCESS && u == uuid {
			return d, nil
		}
	}
	return nil, fmt.Errorf("GPU %s: get handle: %w: %w", uuid, nvml.ERROR_GPU_IS_LOST, gpu.ErrGPUGone)
}

// nvmlErr is the error for an NVML call on a GPU that failed with ret; a
// GPU that fell off the bus in the meantime is gpu.ErrGPUGone.
func nvmlErr(ret nvml.Return, format string, args ...any) error {
	err := fmt.Errorf(format+": %w", append(args, ret)...)
	if ret == nvml.ERROR_GPU_IS_LOST {
		return fmt.Errorf("%w: %w", err, gpu.ErrGPUGone)
	}
	return err
}

// MigMode reports the current and the pending MIG mode.
func (l library) MigMode(uuid string) (bool, bool, error) {
	d, err := l.device(uuid)
	if err != nil {
		return false, false, err
	}
	cur, pending, ret := d.GetMigMode()
	if ret != nvml.SUCCESS {
		return false, false, nvmlErr(ret, "GPU %s: get MIG mode", uuid)
	}
	return cur == nvml.DEVICE_MIG_ENABLE, pending == nvml.DEVICE_MIG_ENABLE, nil
}

// SetMigMode switches MIG mode. Where the change needs a GPU reset
// (Ampere) it returns ErrResetRequired and the change stays pending.
func (l library) SetMigMode(uuid string, on bool) error {
	d, err := l.device(uuid)
	if err != nil {
		return err
	}
	mode := nvml.DEVICE_MIG_DISABLE
	if on {
		mode = nvml.DEVICE_MIG_ENABLE
	}
	activation, ret := d.SetMigMode(mode)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: set MIG mode %v: %w", uuid, on, ret)
	}
	if activation == nvml.ERROR_RESET_REQUIRED {
		return fmt.Errorf("GPU %s: set MIG mode %v: %w", uuid, on, ErrResetRequired)
	}
	if activation != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: set MIG mode %v: activation: %w", uuid, on, activation)
	}
	return nil
}

// profileInfo finds the GPU instance profile with the given ID.
func profileInfo(d nvml.Device, profileID uint32) (nvml.GpuInstanceProfileInfo, error) {
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := d.GetGpuInstanceProfileInfo(index)
		if ret == nvml.SUCCESS && info.Id == profileID {
			return info, nil
		}
	}
	return nvml.GpuInstanceProfileInfo{}, fmt.Errorf("no GPU instance profile with ID %d", profileID)
}

// CreateGPUInstance creates a GPU instance of the profile at exactly the
// placement. A placement that is taken (or overlaps one that is) fails
// with ErrInsufficientResources.
func (l library) CreateGPUInstance(uuid string, profileID uint32, pl gpu.MigPlacement) (int, error) {
	d, err := l.device(uuid)
	if err != nil {
		return 0, err
	}
	info, err := profileInfo(d, profileID)
	if err != nil {
		return 0, fmt.Errorf("GPU %s: %w", uuid, err)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(pl.Start), Size: uint32(pl.Size)})
	if ret == nvml.ERROR_INSUFFICIENT_RESOURCES {
		return 0, fmt.Errorf("GPU %s: create GPU instance (profile %d at %d+%d): %w", uuid, profileID, pl.Start, pl.Size, ErrInsufficientResources)
	}
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: create GPU instance (profile %d at %d+%d): %w", uuid, profileID, pl.Start, pl.Size, ret)
	}
	gii, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: created GPU instance: get info: %w", uuid, ret)
	}
	return int(gii.Id), nil
}

func (l library) gpuInstance(uuid string, giID int) (nvml.GpuInstance, nvml.Return, error) {
	d, err := l.device(uuid)
	if err != nil {
		return nil, nvml.SUCCESS, err
	}
	gi, ret := d.GetGpuInstanceById(giID)
	return gi, ret, nil
}

// CreateComputeInstance creates the compute instance that spans the whole
// GPU instance.
func (l library) CreateComputeInstance(uuid string, giID int) (int, error) {
	gi, ret, err := l.gpuInstance(uuid, giID)
	if err != nil {
		return 0, err
	}
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: GPU instance %d: %w", uuid, giID, ret)
	}
	// The largest compute instance profile the GPU instance offers spans
	// all of it.
	var best *nvml.ComputeInstanceProfileInfo
	for p := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		info, ret := gi.GetComputeInstanceProfileInfo(p, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		if best == nil || info.SliceCount > best.SliceCount {
			best = &info
		}
	}
	if best == nil {
		return 0, fmt.Errorf("GPU %s: GPU instance %d offers no compute instance profile", uuid, giID)
	}
	ci, ret := gi.CreateComputeInstance(best)
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: GPU instance %d: create compute instance: %w", uuid, giID, ret)
	}
	info, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: GPU instance %d: created compute instance: get info: %w", uuid, giID, ret)
	}
	return int(info.Id), nil
}

// MigDeviceUUID returns the MIG-… UUID of a compute instance.
func (l library) MigDeviceUUID(uuid string, giID, ciID int) (string, error) {
	d, err := l.device(uuid)
	if err != nil {
		return "", err
	}
	n, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("GPU %s: count MIG devices: %w", uuid, ret)
	}
	for i := range n {
		m, ret := d.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("GPU %s: MIG device %d: %w", uuid, i, ret)
		}
		g, r1 := m.GetGpuInstanceId()
		c, r2 := m.GetComputeInstanceId()
		if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS || g != giID || c != ciID {
			continue
		}
		u, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("GPU %s: MIG device %d: get UUID: %w", uuid, i, ret)
		}
		return u, nil
	}
	return "", fmt.Errorf("GPU %s: no MIG device for GPU instance %d, compute instance %d", uuid, giID, ciID)
}

// DestroyComputeInstance destroys a compute instance; one that is already
// gone is not an error.
func (l library) DestroyComputeInstance(uuid string, giID, ciID int) error {
	gi, ret, err := l.gpuInstance(uuid, giID)
	if err != nil {
		return err
	}
	if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT || ret == nvml.ERROR_NOT_SUPPORTED {
		return nil // the GPU instance is gone (or MIG is off): so is the CI
	}
	if ret != nvml.SUCCESS {
		return nvmlErr(ret, "GPU %s: GPU instance %d", uuid, giID)
	}
	ci, ret := gi.GetComputeInstanceById(ciID)
	if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
		return nil
	}
	if ret != nvml.SUCCESS {
		return nvmlErr(ret, "GPU %s: GPU instance %d: compute instance %d", uuid, giID, ciID)
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS && ret != nvml.ERROR_INVALID_ARGUMENT && ret != nvml.ERROR_NOT_FOUND {
		return nvmlErr(ret, "GPU %s: GPU instance %d: destroy compute instance %d", uuid, giID, ciID)
	}
	return nil
}

// DestroyGPUInstance destroys a GPU instance and the compute instances
// left in it, provided it is the instance of the given profile at the given
// placement (IDs are reused); one that is gone, or that is now another
// instance, is left alone and not an error.
func (l library) DestroyGPUInstance(uuid string, giID int, profileID uint32, pl gpu.MigPlacement) error {
	gi, ret, err := l.gpuInstance(uuid, giID)
	if err != nil {
		return err
	}
	if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT || ret == nvml.ERROR_NOT_SUPPORTED {
		return nil
	}
	if ret != nvml.SUCCESS {
		return nvmlErr(ret, "GPU %s: GPU instance %d", uuid, giID)
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return nvmlErr(ret, "GPU %s: GPU instance %d: get info", uuid, giID)
	}
	if info.ProfileId != profileID || int(info.Placement.Start) != pl.Start || int(info.Placement.Size) != pl.Size {
		return nil // the ID now names someone else's instance
	}
	cis, err := discovery.ComputeInstances(gi)
	if err != nil {
		return fmt.Errorf("GPU %s: GPU instance %d: %w", uuid, giID, err)
	}
	for _, ci := range cis {
		if ret := ci.Destroy(); ret != nvml.SUCCESS && ret != nvml.ERROR_INVALID_ARGUMENT {
			return nvmlErr(ret, "GPU %s: GPU instance %d: destroy compute instance", uuid, giID)
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS && ret != nvml.ERROR_INVALID_ARGUMENT && ret != nvml.ERROR_NOT_FOUND {
		return nvmlErr(ret, "GPU %s: destroy GPU instance %d", uuid, giID)
	}
	return nil
}

// MigInstances lists the GPU instances that exist on the GPU (none with
// MIG mode off).
func (l library) MigInstances(uuid string) ([]gpu.MigInstance, error) {
	d, err := l.device(uuid)
	if err != nil {
		return nil, err
	}
	insts, err := discovery.MigInstances(d)
	if errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		return nil, fmt.Errorf("GPU %s: %w: %w", uuid, err, gpu.ErrGPUGone)
	}
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %w", uuid, err)
	}
	return insts, nil
}
