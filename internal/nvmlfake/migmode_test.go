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

func TestSetMigMode(t *testing.T) {
	tests := []struct {
		name       string
		profile    string
		gpu        int
		mode       int
		activation nvml.Return
		ret        nvml.Return
		current    int
		pending    int
	}{
		{"Hopper applies at once", "dgx-h100", 0, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS, nvml.SUCCESS, 1, 1},
		{"Blackwell applies at once", "dgx-b200", 0, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS, nvml.SUCCESS, 1, 1},
		{"Ampere waits for a reset", "dgx-a100", 0, nvml.DEVICE_MIG_ENABLE, nvml.ERROR_RESET_REQUIRED, nvml.SUCCESS, 0, 1},
		{"Ampere no-op is immediate", "dgx-a100", 0, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS, nvml.SUCCESS, 0, 0},
		{"non-MIG GPU", "mixed", 8, nvml.DEVICE_MIG_ENABLE, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, 0, 0},
		{"invalid mode", "dgx-h100", 0, 7, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.profile, "n", t.TempDir())
			d := device(t, s, tc.gpu)
			act, ret := d.SetMigMode(tc.mode)
			if act != tc.activation || ret != tc.ret {
				t.Fatalf("SetMigMode(%d) = %v, %v; want %v, %v", tc.mode, act, ret, tc.activation, tc.ret)
			}
			cur, pend, ret := d.GetMigMode()
			if ret == nvml.ERROR_NOT_SUPPORTED && tc.ret == nvml.ERROR_NOT_SUPPORTED {
				return
			}
			if cur != tc.current || pend != tc.pending {
				t.Errorf("GetMigMode = %d, %d; want %d, %d", cur, pend, tc.current, tc.pending)
			}
		})
	}
}

func TestAmperePendingUntilReset(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-a100", "n", dir)
	d := device(t, s, 3)
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	info := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := d.CreateGpuInstance(info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("CreateGpuInstance with MIG pending = %v, want ERROR_NOT_SUPPORTED", ret)
	}
	if n, _ := d.GetMaxMigDeviceCount(); n != 0 {
		t.Errorf("GetMaxMigDeviceCount with MIG pending = %d, want 0", n)
	}
	uuid, _ := d.GetUUID()
	if err := ResetGPU(dir, uuid); err != nil {
		t.Fatal(err)
	}
	if cur, pend, _ := d.GetMigMode(); cur != 1 || pend != 1 {
		t.Fatalf("after reset GetMigMode = %d, %d; want 1, 1", cur, pend)
	}
	createGI(t, d, info, nil)
	if other, _, _ := device(t, s, 2).GetMigMode(); other != 0 {
		t.Errorf("resetting GPU 3 changed GPU 2's MIG mode to %d", other)
	}
}

func TestDisableMIGWithInstancesIsInUse(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	gi := createGI(t, d, profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE), nil)
	if _, ret := d.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.ERROR_IN_USE {
		t.Fatalf("disable MIG with a GPU instance = %v, want ERROR_IN_USE", ret)
	}
	if cur, _, _ := d.GetMigMode(); cur != 1 {
		t.Fatalf("MIG mode changed to %d despite ERROR_IN_USE", cur)
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := d.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.SUCCESS {
		t.Fatalf("disable MIG without instances = %v", ret)
	}
}

func TestCoresNotSupportedWhileMIG(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	if _, ret := d.GetNumGpuCores(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("GetNumGpuCores with MIG on = %v, want ERROR_NOT_SUPPORTED (as NVML documents)", ret)
	}
}
