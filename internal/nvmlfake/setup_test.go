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

// start returns an initialized Server of the given profile over dir.
func start(t *testing.T, profile, node, dir string) *Server {
	t.Helper()
	s, err := New(Options{Profile: profile, NodeName: node, StateDir: dir})
	if err != nil {
		t.Fatalf("New(%s): %v", profile, err)
	}
	if ret := s.Init(); ret != nvml.SUCCESS {
		t.Fatalf("Init: %v", ret)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}

// device returns GPU i's handle.
func device(t *testing.T, lib nvml.Interface, i int) nvml.Device {
	t.Helper()
	d, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex(%d): %v", i, ret)
	}
	return d
}

// profileInfo returns the GPU instance profile at index (an
// NVML_GPU_INSTANCE_PROFILE_* value).
func profileInfo(t *testing.T, d nvml.Device, index int) *nvml.GpuInstanceProfileInfo {
	t.Helper()
	info, ret := d.GetGpuInstanceProfileInfo(index)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetGpuInstanceProfileInfo(%d): %v", index, ret)
	}
	return &info
}

// enableMIG turns MIG on for a GPU that applies it at once.
func enableMIG(t *testing.T, d nvml.Device) {
	t.Helper()
	if act, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS || act != nvml.SUCCESS {
		t.Fatalf("SetMigMode(enable) = %v, %v", act, ret)
	}
}

// createGI creates a GPU instance and fails the test unless it works.
func createGI(t *testing.T, d nvml.Device, info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) nvml.GpuInstance {
	t.Helper()
	var gi nvml.GpuInstance
	var ret nvml.Return
	if pl == nil {
		gi, ret = d.CreateGpuInstance(info)
	} else {
		gi, ret = d.CreateGpuInstanceWithPlacement(info, pl)
	}
	if ret != nvml.SUCCESS {
		t.Fatalf("create GPU instance of profile %d at %v: %v", info.Id, pl, ret)
	}
	return gi
}

func giInfo(t *testing.T, gi nvml.GpuInstance) nvml.GpuInstanceInfo {
	t.Helper()
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		t.Fatalf("GpuInstance.GetInfo: %v", ret)
	}
	return info
}

func placement(start, size uint32) *nvml.GpuInstancePlacement {
	return &nvml.GpuInstancePlacement{Start: start, Size: size}
}
