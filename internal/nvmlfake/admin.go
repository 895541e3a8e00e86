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
)

// AdminMIG does on the GPU at index what an admin does with nvidia-smi
// before gpudra runs (`nvidia-smi -mig 1`, `nvidia-smi mig -cgi ... -C`):
// MIG mode on, one GPU instance of giProfile at memory slices
// [start, start+size), and its compute instance of ciProfile sharing the
// instance's engines. Tests of how gpudra treats instances it did not
// create use it; it goes through the same NVML calls as an admin's tool,
// so a placement the GPU refuses fails here too.
func AdminMIG(lib nvml.Interface, index, giProfile, ciProfile int, start, size uint32) error {
	d, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: %v", index, ret)
	}
	if _, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: MIG mode on: %v", index, ret)
	}
	info, ret := d.GetGpuInstanceProfileInfo(giProfile)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: GPU instance profile %d: %v", index, giProfile, ret)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: GPU instance at %d+%d: %v", index, start, size, ret)
	}
	ci, ret := gi.GetComputeInstanceProfileInfo(ciProfile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: compute instance profile %d: %v", index, ciProfile, ret)
	}
	if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: compute instance: %v", index, ret)
	}
	return nil
}
