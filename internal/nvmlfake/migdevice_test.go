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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// makeMIGDevice creates a GPU instance of the profile index at start and a
// full compute instance in it, and returns the compute instance.
func makeMIGDevice(t *testing.T, d nvml.Device, index int, start, size uint32) (nvml.GpuInstance, nvml.ComputeInstance) {
	t.Helper()
	info := profileInfo(t, d, index)
	gi := createGI(t, d, info, placement(start, size))
	ciIndex := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[info.SliceCount]
	ci, ret := gi.CreateComputeInstance(ciProfileInfo(t, gi, ciIndex))
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return gi, ci
}

func TestMIGDevices(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 1)
	if n, ret := d.GetMaxMigDeviceCount(); n != 0 || ret != nvml.SUCCESS {
		t.Errorf("GetMaxMigDeviceCount with MIG off = %d, %v", n, ret)
	}
	enableMIG(t, d)
	if n, _ := d.GetMaxMigDeviceCount(); n != 7 {
		t.Errorf("GetMaxMigDeviceCount = %d, want 7", n)
	}
	gi3, ci3 := makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)

	if _, ret := d.GetMigDeviceHandleByIndex(2); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("MIG device 2 of 2 = %v, want ERROR_NOT_FOUND", ret)
	}
	if _, ret := d.GetMigDeviceHandleByIndex(7); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("MIG device 7 = %v, want ERROR_INVALID_ARGUMENT", ret)
	}
	mig, ret := d.GetMigDeviceHandleByIndex(0) // GPU instance 0: the 3g
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if is, _ := mig.IsMigDeviceHandle(); !is {
		t.Error("IsMigDeviceHandle = false on a MIG device")
	}
	if is, _ := d.IsMigDeviceHandle(); is {
		t.Error("IsMigDeviceHandle = true on a GPU")
	}
	if parent, _ := mig.GetDeviceHandleFromMigDeviceHandle(); parent != d {
		t.Error("GetDeviceHandleFromMigDeviceHandle is not the GPU")
	}
	if p, _ := s.DeviceGetDeviceHandleFromMigDeviceHandle(mig); p != d {
		t.Error("library-level GetDeviceHandleFromMigDeviceHandle is not the GPU")
	}
	giID, _ := mig.GetGpuInstanceId()
	ciID, _ := mig.GetComputeInstanceId()
	gInfo := giInfo(t, gi3)
	cInfo, _ := ci3.GetInfo()
	if uint32(giID) != gInfo.Id || uint32(ciID) != cInfo.Id {
		t.Errorf("MIG device IDs %d/%d, want %d/%d", giID, ciID, gInfo.Id, cInfo.Id)
	}
	mem, _ := mig.GetMemoryInfo()
	attrs, _ := mig.GetAttributes()
	// 3g.40gb on an H100: 39.50 GiB and 60 SMs (nvidia-smi mig -lgip).
	if mem.Total != 40448<<20 || attrs.MemorySizeMB != 40448 || attrs.GpuInstanceSliceCount != 3 || attrs.MultiprocessorCount != 60 {
		t.Errorf("MIG memory %d, attributes %+v", mem.Total, attrs)
	}
	if name, _ := mig.GetName(); name != "NVIDIA H100 80GB HBM3 MIG 3g.40gb" {
		t.Errorf("MIG name %q", name)
	}
	uuid, _ := mig.GetUUID()
	if !strings.HasPrefix(uuid, "MIG-") {
		t.Errorf("MIG UUID %q", uuid)
	}
	if got, ret := s.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS || got != mig {
		t.Errorf("DeviceGetHandleByUUID(MIG) = %v, %v", got, ret)
	}

	// Destroyed and recreated at the same placement: same UUID; the old
	// handle is stale meanwhile.
	ci3.Destroy()
	if _, ret := mig.GetUUID(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("stale MIG handle GetUUID = %v", ret)
	}
	gi3.Destroy()
	makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	again, _ := s.DeviceGetHandleByUUID(uuid)
	if again == nil {
		t.Fatal("recreated MIG device has a different UUID")
	}

	// A different placement is a different device.
	other := device(t, s, 2)
	enableMIG(t, other)
	makeMIGDevice(t, other, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 4)
	m2, _ := other.GetMigDeviceHandleByIndex(0)
	if u2, _ := m2.GetUUID(); u2 == uuid {
		t.Error("MIG devices of different GPUs share a UUID")
	}
}
