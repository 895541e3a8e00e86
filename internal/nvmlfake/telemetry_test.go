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
	"encoding/binary"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/utils/ptr"
)

// TestTelemetryAcrossProcesses: what one process sets (a test, the e2e
// suite on the node) is what another reads through NVML; a GPU in MIG mode
// and a MIG device report no utilization, as on hardware; what is not set
// is NOT_SUPPORTED rather than invented.
func TestTelemetryAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	reader := mustServer(t, dir)
	g0, _ := reader.DeviceGetHandleByIndex(0)
	uuid, _ := g0.GetUUID()

	if u, ret := g0.GetUtilizationRates(); ret != nvml.SUCCESS || u.Gpu != 0 {
		t.Fatalf("an idle GPU: utilization %+v, %v; want 0%%", u, ret)
	}
	if _, ret := g0.GetTemperature(nvml.TEMPERATURE_GPU); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("temperature never set: %v, want NOT_SUPPORTED", ret)
	}

	if err := SetTelemetry(dir, uuid, Telemetry{GPUUtilization: 73, MemoryUtilization: 20, MemoryUsedBytes: 5 << 30,
		TemperatureC: ptr.To[uint32](55), PowerMilliwatts: ptr.To[uint32](410500)}); err != nil {
		t.Fatal(err)
	}
	if u, ret := g0.GetUtilizationRates(); ret != nvml.SUCCESS || u.Gpu != 73 || u.Memory != 20 {
		t.Errorf("utilization %+v, %v; want 73%% and 20%%", u, ret)
	}
	m, ret := g0.GetMemoryInfo()
	if ret != nvml.SUCCESS || m.Used != 5<<30 || m.Free != m.Total-m.Used {
		t.Errorf("memory %+v, %v; want 5 GiB used", m, ret)
	}
	if c, _ := g0.GetTemperature(nvml.TEMPERATURE_GPU); c != 55 {
		t.Errorf("temperature %d, want 55", c)
	}
	if mw, _ := g0.GetPowerUsage(); mw != 410500 {
		t.Errorf("power %d mW, want 410500", mw)
	}
	if err := SetTelemetry(dir, uuid, Telemetry{GPUUtilization: 101}); err == nil {
		t.Error("a utilization over 100% was accepted")
	}

	// MIG mode on: NVML reports no utilization for the GPU, nor for its
	// MIG devices; a MIG device reports its own memory.
	if ret, _ := g0.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := g0.GetUtilizationRates(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("a GPU in MIG mode reports utilization (%v)", ret)
	}
	info, _ := g0.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	gi, ret := g0.CreateGpuInstance(&info)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0)
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	mig, _ := g0.GetMigDeviceHandleByIndex(0)
	migUUID, _ := mig.GetUUID()
	if err := SetTelemetry(dir, migUUID, Telemetry{MemoryUsedBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	byUUID, ret := reader.DeviceGetHandleByUUID(migUUID)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if m, _ := byUUID.GetMemoryInfo(); m.Used != 1<<30 || m.Total != uint64(info.MemorySizeMB)<<20 {
		t.Errorf("MIG device memory %+v, want 1 GiB used of its %d MiB", m, info.MemorySizeMB)
	}
	if _, ret := byUUID.GetUtilizationRates(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("a MIG device reports utilization (%v)", ret)
	}
}

// TestRecoveryAction: an XID sets the driver's recovery action, which a
// GPU reset clears; an application XID asks for nothing.
func TestRecoveryAction(t *testing.T) {
	dir := t.TempDir()
	s := mustServer(t, dir)
	g, _ := s.DeviceGetHandleByIndex(3)
	uuid, _ := g.GetUUID()
	action := func() nvml.DeviceGpuRecoveryAction {
		t.Helper()
		v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
		if ret := g.GetFieldValues(v); ret != nvml.SUCCESS || nvml.Return(v[0].NvmlReturn) != nvml.SUCCESS {
			t.Fatalf("GetFieldValues: %v / %v", ret, nvml.Return(v[0].NvmlReturn))
		}
		return nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint32(v[0].Value[:4]))
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Fatalf("a fresh GPU asks for %d", a)
	}
	if err := InjectXID(dir, uuid, 13); err != nil {
		t.Fatal(err)
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Errorf("after an application XID: %d, want NONE", a)
	}
	if err := InjectXID(dir, uuid, 48); err != nil {
		t.Fatal(err)
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_GPU_RESET {
		t.Errorf("after XID 48: %d, want GPU_RESET", a)
	}
	if err := ResetGPU(dir, uuid); err != nil {
		t.Fatal(err)
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Errorf("after the reset: %d, want NONE", a)
	}
	v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_ECC_CURRENT}}
	if g.GetFieldValues(v); nvml.Return(v[0].NvmlReturn) != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("another field: %v, want NOT_SUPPORTED", nvml.Return(v[0].NvmlReturn))
	}
}

func mustServer(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := New(Options{Profile: "dgx-h100", NodeName: "n", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ret := s.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}
