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
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func ciProfileInfo(t *testing.T, gi nvml.GpuInstance, index int) *nvml.ComputeInstanceProfileInfo {
	t.Helper()
	info, ret := gi.GetComputeInstanceProfileInfo(index, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetComputeInstanceProfileInfo(%d): %v", index, ret)
	}
	return &info
}

func TestComputeInstances(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	gi := createGI(t, d, profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE), nil)

	if _, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 0); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("4-slice compute profile in a 3g instance: %v", ret)
	}
	if _, ret := gi.GetComputeInstanceProfileInfo(0, 5); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("invalid engine profile: %v", ret)
	}
	one := ciProfileInfo(t, gi, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
	two := ciProfileInfo(t, gi, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE)
	full := ciProfileInfo(t, gi, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE)
	if one.MultiprocessorCount*3 != full.MultiprocessorCount {
		t.Errorf("1c SMs %d, 3c SMs %d", one.MultiprocessorCount, full.MultiprocessorCount)
	}

	c1, ret := gi.CreateComputeInstanceWithPlacement(one, &nvml.ComputeInstancePlacement{Start: 2, Size: 1})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(full); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("3c beside a 1c = %v, want ERROR_INSUFFICIENT_RESOURCES", ret)
	}
	c2, ret := gi.CreateComputeInstance(two)
	if ret != nvml.SUCCESS {
		t.Fatalf("2c at 0 beside 1c at 2: %v", ret)
	}
	if _, ret := gi.CreateComputeInstance(one); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("1c in a full instance = %v", ret)
	}
	if _, ret := gi.CreateComputeInstanceWithPlacement(one, &nvml.ComputeInstancePlacement{Start: 5, Size: 1}); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("1c outside the instance = %v", ret)
	}
	info1, _ := c1.GetInfo()
	info2, _ := c2.GetInfo()
	if info1.Id != 0 || info2.Id != 1 || info2.Placement.Start != 0 || info1.GpuInstance != gi || info1.Device != d {
		t.Errorf("compute instances %+v, %+v", info1, info2)
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Errorf("destroy a GPU instance with compute instances = %v, want ERROR_IN_USE", ret)
	}
	if got, ret := gi.GetComputeInstanceById(1); ret != nvml.SUCCESS || got != c2 {
		t.Errorf("GetComputeInstanceById(1) = %v, %v", got, ret)
	}
	if _, ret := gi.GetComputeInstanceById(4); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("GetComputeInstanceById(4) = %v", ret)
	}
	if cis, _ := gi.GetComputeInstances(one); len(cis) != 1 || cis[0] != c1 {
		t.Errorf("GetComputeInstances(1c) = %v", cis)
	}
	if ret := c1.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := c1.GetInfo(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GetInfo on a destroyed compute instance = %v", ret)
	}
	c3, _ := gi.CreateComputeInstance(one)
	if info, _ := c3.GetInfo(); info.Id != 0 || info.Placement.Start != 2 {
		t.Errorf("recreated 1c: %+v, want ID 0 at 2", info)
	}
	c2.Destroy()
	c3.Destroy()
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Errorf("destroy an empty GPU instance = %v", ret)
	}
}
