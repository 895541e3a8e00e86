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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s1 := start(t, "dgx-h100", "n", dir)
	d := device(t, s1, 5)
	enableMIG(t, d)
	_, ci := makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
	gi1ID := giInfo(t, createGI(t, d, profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE), placement(6, 1))).Id
	ciInfo, _ := ci.GetInfo()
	mig, _ := d.GetMigDeviceHandleByIndex(0)
	migUUID, _ := mig.GetUUID()
	s1.Shutdown()

	// A restarted plugin: a new Server over the same directory.
	s2 := start(t, "dgx-h100", "n", dir)
	d2 := device(t, s2, 5)
	if cur, pend, _ := d2.GetMigMode(); cur != 1 || pend != 1 {
		t.Fatalf("MIG mode after restart %d/%d", cur, pend)
	}
	gis, _ := d2.GetGpuInstances(profileInfo(t, d2, nvml.GPU_INSTANCE_PROFILE_2_SLICE))
	if len(gis) != 1 {
		t.Fatalf("2g instances after restart: %d", len(gis))
	}
	info := giInfo(t, gis[0])
	if info.Id != 0 || info.Placement != (nvml.GpuInstancePlacement{Start: 2, Size: 2}) {
		t.Errorf("2g instance after restart %+v", info)
	}
	cis, _ := gis[0].GetComputeInstances(ciProfileInfo(t, gis[0], nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE))
	if len(cis) != 1 {
		t.Fatalf("compute instances after restart: %d", len(cis))
	}
	if got, _ := cis[0].GetInfo(); got.Id != ciInfo.Id || got.Placement != ciInfo.Placement {
		t.Errorf("compute instance after restart %+v, was %+v", got, ciInfo)
	}
	if _, ret := s2.DeviceGetHandleByUUID(migUUID); ret != nvml.SUCCESS {
		t.Errorf("MIG device %s not found after restart: %v", migUUID, ret)
	}
	if gi, ret := d2.GetGpuInstanceById(int(gi1ID)); ret != nvml.SUCCESS || giInfo(t, gi).Placement.Start != 6 {
		t.Errorf("1g instance %d after restart: %v", gi1ID, ret)
	}
	if others, _, _ := device(t, s2, 4).GetMigMode(); others != 0 {
		t.Errorf("GPU 4 MIG mode %d after restart", others)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestServersShareState(t *testing.T) {
	dir := t.TempDir()
	a := start(t, "dgx-h100", "n", dir)
	b := start(t, "dgx-h100", "n", dir)
	da, db := device(t, a, 0), device(t, b, 0)
	enableMIG(t, da)
	if cur, _, _ := db.GetMigMode(); cur != 1 {
		t.Fatal("the second server does not see MIG enabled by the first")
	}
	seven := profileInfo(t, da, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	createGI(t, da, seven, nil)
	if _, ret := db.CreateGpuInstance(seven); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("second server created over the first's instance: %v", ret)
	}
}

func TestRebootDropsInstances(t *testing.T) {
	dir := t.TempDir()
	bootFile := filepath.Join(t.TempDir(), "boot_id")
	old := bootIDFile
	bootIDFile = bootFile
	t.Cleanup(func() { bootIDFile = old })

	os.WriteFile(bootFile, []byte("boot-1\n"), 0o644)
	s1 := start(t, "mixed", "n", dir)
	h100, a100 := device(t, s1, 0), device(t, s1, 4)
	enableMIG(t, h100)
	createGI(t, h100, profileInfo(t, h100, nvml.GPU_INSTANCE_PROFILE_7_SLICE), nil)
	a100.SetMigMode(nvml.DEVICE_MIG_ENABLE) // pending on Ampere
	s1.Shutdown()

	os.WriteFile(bootFile, []byte("boot-2\n"), 0o644)
	s2 := start(t, "mixed", "n", dir)
	h100, a100 = device(t, s2, 0), device(t, s2, 4)
	if cur, _, _ := h100.GetMigMode(); cur != 1 {
		t.Error("MIG mode did not survive the reboot")
	}
	if gis, _ := h100.GetGpuInstances(profileInfo(t, h100, nvml.GPU_INSTANCE_PROFILE_7_SLICE)); len(gis) != 0 {
		t.Error("GPU instances survived the reboot")
	}
	if cur, pend, _ := a100.GetMigMode(); cur != 1 || pend != 1 {
		t.Errorf("pending MIG mode after reboot: %d/%d, want 1/1", cur, pend)
	}
}

func TestRebootFunc(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-h100", "n", dir)
	d := device(t, s, 0)
	enableMIG(t, d)
	createGI(t, d, profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE), nil)
	if err := Reboot(dir); err != nil {
		t.Fatal(err)
	}
	// The running server sees it at its next call.
	if gis, _ := d.GetGpuInstances(profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE)); len(gis) != 0 {
		t.Error("instances survived Reboot")
	}
	if err := ResetGPU(dir, "GPU-nope"); err == nil {
		t.Error("ResetGPU of an unknown GPU succeeded")
	}
}

func TestBadStateFile(t *testing.T) {
	tests := []struct {
		name    string
		content func(uuid string) string
		wantErr string
	}{
		{"not JSON", func(string) string { return "{" }, "corrupt"},
		{"future version", func(string) string { return `{"version": 9, "gpus": {}}` }, "version 9"},
		{"overlapping instances", func(uuid string) string {
			return `{"version": 1, "gpus": {"` + uuid + `": {"migMode": 1, "migPendingMode": 1, "gpuInstances": [
				{"id": 0, "profileID": 0, "start": 0, "size": 8},
				{"id": 1, "profileID": 19, "start": 3, "size": 1}]}}}`
		}, "does not fit"},
		{"instances with MIG off", func(uuid string) string {
			return `{"version": 1, "gpus": {"` + uuid + `": {"gpuInstances": [{"id": 0, "profileID": 0, "start": 0, "size": 8}]}}}`
		}, "MIG disabled"},
	}
	uuid := gpuUUID("n", 0, catalog["h100-sxm5-80gb"])
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, stateFileName), []byte(tc.content(uuid)), 0o644)
			_, err := New(Options{Profile: "dgx-h100", NodeName: "n", StateDir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
