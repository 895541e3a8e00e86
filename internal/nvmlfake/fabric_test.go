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

func writeProfile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A profile file gives each tray of a fake rack its own domain, clique
// and place, on top of the built-in gb200-tray.
func TestProfileFileSetsFabricAndPlatform(t *testing.T) {
	path := writeProfile(t, `profile: gb200-tray
fabric: {clusterUUID: 9f410827-0000-4000-8000-000000000001, cliqueID: 32766}
platform: {chassisSerial: RACK-A, slotNumber: 25, trayIndex: 15, hostID: 1}
`)
	s := start(t, path, "tray-15", "")
	for i := range 4 {
		d := device(t, s, i)
		f, ret := d.GetGpuFabricInfo_v4()
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if got := uuidString(f.ClusterUuid); got != "9f410827-0000-4000-8000-000000000001" || f.Cliques[0].Id != 32766 ||
			f.State != nvml.GPU_FABRIC_STATE_COMPLETED || f.HealthSummary != nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY {
			t.Errorf("GPU %d fabric: %s clique %d state %d health %d", i, got, f.Cliques[0].Id, f.State, f.HealthSummary)
		}
		p, ret := d.GetPlatformInfo()
		if ret != nvml.SUCCESS || cBytes(p.ChassisSerialNumber[:]) != "RACK-A" || p.SlotNumber != 25 || p.TrayIndex != 15 || p.HostId != 1 {
			t.Errorf("GPU %d platform: %+v %v", i, p, ret)
		}
	}
}

func TestProfileFileFabricErrors(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"fabric on a GPU outside any fabric": {"gpus:\n- model: h100-sxm5-80gb\nfabric: {cliqueID: 1}\n", "model h100-sxm5-80gb is in no multi-node NVLink fabric"},
		"bad state":                          {"profile: gb200-tray\nfabric: {state: DONE}\n", `fabric.state "DONE": want one of COMPLETED, IN_PROGRESS, NOT_STARTED`},
		"bad UUID":                           {"profile: gb200-tray\nfabric: {clusterUUID: rack-1}\n", `fabric.clusterUUID "rack-1"`},
		"long serial":                        {"profile: gb200-tray\nplatform: {chassisSerial: 1234567890123456}\n", "at most 15 characters"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Options{Profile: writeProfile(t, tc.body), NodeName: "n"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// Transitions injected through the state directory, from another process
// as far as the Server can tell, are what it answers next: the fabric
// manager's probe starting and finishing, the fabric turning unhealthy,
// NMX moving the tray to another partition.
func TestSetFabricTransitions(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "gb200-tray", "tray-1", dir)
	reading := func(i int) nvml.GpuFabricInfo_v4 {
		t.Helper()
		f, ret := device(t, s, i).GetGpuFabricInfo_v4()
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		return f
	}
	if err := SetFabric(dir, "", FabricChange{State: "NOT_STARTED"}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if f := reading(i); f.State != nvml.GPU_FABRIC_STATE_NOT_STARTED {
			t.Errorf("GPU %d: state %d after NOT_STARTED on every GPU", i, f.State)
		}
	}
	gpu2, _ := device(t, s, 2).GetUUID()
	if err := SetFabric(dir, "", FabricChange{State: "in_progress"}); err != nil {
		t.Fatal(err)
	}
	if err := SetFabric(dir, gpu2, FabricChange{State: "COMPLETED"}); err != nil {
		t.Fatal(err)
	}
	if f := reading(2); f.State != nvml.GPU_FABRIC_STATE_COMPLETED {
		t.Errorf("GPU 2: state %d, want COMPLETED", f.State)
	}
	if f := reading(1); f.State != nvml.GPU_FABRIC_STATE_IN_PROGRESS {
		t.Errorf("GPU 1: state %d, want IN_PROGRESS (only GPU 2 completed)", f.State)
	}
	clique := uint32(7)
	if err := SetFabric(dir, "", FabricChange{State: "COMPLETED", Health: "UNHEALTHY", CliqueID: &clique}); err != nil {
		t.Fatal(err)
	}
	// A second Server over the same directory (a restarted plugin) reads
	// the same.
	s2 := start(t, "gb200-tray", "tray-1", dir)
	for _, lib := range []*Server{s, s2} {
		d := device(t, lib, 3)
		f, _ := d.GetGpuFabricInfo_v4()
		v1, _ := d.GetGpuFabricInfo()
		if f.State != nvml.GPU_FABRIC_STATE_COMPLETED || f.HealthSummary != nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY || f.Cliques[0].Id != 7 || v1.CliqueId != 7 {
			t.Errorf("after the change: v4 %+v, v1 clique %d", f, v1.CliqueId)
		}
	}
	if err := SetFabric(dir, "GPU-nope", FabricChange{State: "COMPLETED"}); err == nil {
		t.Error("SetFabric of an unknown GPU succeeded")
	}
	if err := SetFabric(dir, "", FabricChange{Health: "GOOD"}); err == nil || !strings.Contains(err.Error(), "HEALTHY") {
		t.Errorf("bad health: %v", err)
	}
}

// A GPU outside any fabric keeps answering NOT_SUPPORTED whatever is
// injected; an in-memory Server takes changes too.
func TestSetFabricInMemory(t *testing.T) {
	s := start(t, "mixed", "n", "")
	l4, _ := device(t, s, 8).GetUUID()
	if err := s.SetFabric(l4, FabricChange{State: "IN_PROGRESS"}); err != nil {
		t.Fatal(err)
	}
	if _, ret := device(t, s, 8).GetGpuFabricInfo_v4(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("L4 fabric: %v, want ERROR_NOT_SUPPORTED", ret)
	}
	h100, _ := device(t, s, 0).GetUUID()
	if err := s.SetFabric(h100, FabricChange{State: "IN_PROGRESS"}); err != nil {
		t.Fatal(err)
	}
	if f, _ := device(t, s, 0).GetGpuFabricInfo_v4(); f.State != nvml.GPU_FABRIC_STATE_IN_PROGRESS {
		t.Errorf("H100 fabric state %d, want IN_PROGRESS", f.State)
	}
}
