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
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// A GB200 tray: every GPU reads the capture's fabric and its place in
// the rack, and the node is in the domain <clusterUUID>.<cliqueID>.
func TestDiscoverGB200Tray(t *testing.T) {
	node, err := Discover(context.Background(), fake(t, "gb200-tray"), "tray")
	if err != nil {
		t.Fatal(err)
	}
	if len(node.GPUs) != 4 {
		t.Fatalf("%d GPUs, want 4", len(node.GPUs))
	}
	modules := []int{2, 1, 4, 3}
	for i, g := range node.GPUs {
		wantFabric := gpu.Fabric{State: gpu.FabricCompleted, Status: "SUCCESS", ClusterUUID: "00000001-0000-0000-0000-000000000001", CliqueID: 2, Health: gpu.FabricHealthy}
		if g.Fabric != wantFabric {
			t.Errorf("GPU %d fabric %+v, want %+v", i, g.Fabric, wantFabric)
		}
		wantPlatform := gpu.Platform{Known: true, ChassisSerial: "1820000000001", SlotNumber: 14, TrayIndex: 4, HostID: 1, ModuleID: modules[i], ModuleIDKnown: true}
		if g.Platform != wantPlatform {
			t.Errorf("GPU %d platform %+v, want %+v", i, g.Platform, wantPlatform)
		}
	}
	d := node.NVLinkDomain()
	if d.Name != "00000001-0000-0000-0000-000000000001.2" || !d.Fabric {
		t.Errorf("domain %+v", d)
	}
}

// The nodes that are no GB200 tray are in no fabric, each in its own way:
// the H100 reads Completed with a zero cluster UUID, the A100 and L4 do
// not answer.
func TestDiscoverOutsideAnyFabric(t *testing.T) {
	node, err := Discover(context.Background(), fake(t, "mixed"), "n")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range node.GPUs {
		want := gpu.Fabric{State: gpu.FabricNotSupported}
		if g.ProductName == "NVIDIA H100 80GB HBM3" {
			want = gpu.Fabric{State: gpu.FabricCompleted, Status: "SUCCESS", ClusterUUID: gpu.ZeroClusterUUID}
		}
		if g.Fabric != want {
			t.Errorf("%s %s: fabric %+v, want %+v", g.DeviceName(), g.ProductName, g.Fabric, want)
		}
		if g.Platform.Known || g.Platform.ModuleIDKnown {
			t.Errorf("%s: platform %+v from a GPU the fake has no platform facts for", g.DeviceName(), g.Platform)
		}
	}
	if d := node.NVLinkDomain(); d != (gpu.NVLinkDomain{}) {
		t.Errorf("domain %+v, want none and no fabric", d)
	}
}

// Fabric transitions injected into the fake's state move the node in and
// out of its domain, with the reason a user reads.
func TestDiscoverFabricTransitions(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(profile, []byte("profile: gb200-tray\nfabric: {clusterUUID: 9F410827-0000-4000-8000-000000000001, cliqueID: 32766}\nplatform: {trayIndex: 15}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := nvmlfake.New(nvmlfake.Options{Profile: profile, NodeName: "tray-15", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	t.Cleanup(func() { lib.Shutdown() })
	domain := func() gpu.NVLinkDomain {
		t.Helper()
		node, err := Discover(context.Background(), lib, "tray-15")
		if err != nil {
			t.Fatal(err)
		}
		if tray := node.GPUs[0].Platform.TrayIndex; tray != 15 {
			t.Errorf("tray index %d, want the profile's 15", tray)
		}
		return node.NVLinkDomain()
	}
	const name = "9f410827-0000-4000-8000-000000000001.32766"
	if d := domain(); d.Name != name {
		t.Fatalf("domain %+v, want %s", d, name)
	}
	uuid2 := func() string {
		d, _ := lib.DeviceGetHandleByIndex(2)
		u, _ := d.GetUUID()
		return u
	}()
	steps := []struct {
		uuid    string
		change  nvmlfake.FabricChange
		name    string
		message string
	}{
		{"", nvmlfake.FabricChange{State: "NOT_STARTED"}, "", "gpu-0: fabric state NOT_STARTED"},
		{"", nvmlfake.FabricChange{State: "IN_PROGRESS"}, "", "gpu-0: fabric state IN_PROGRESS"},
		{"", nvmlfake.FabricChange{State: "COMPLETED"}, name, ""},
		{uuid2, nvmlfake.FabricChange{Health: "UNHEALTHY"}, "", "gpu-2: fabric health UNHEALTHY"},
		{uuid2, nvmlfake.FabricChange{Health: "HEALTHY"}, name, ""},
		{uuid2, nvmlfake.FabricChange{CliqueID: ptr(uint32(1))}, "", "gpu-2: in clique 1, gpu-0 in clique 32766"},
		{"", nvmlfake.FabricChange{CliqueID: ptr(uint32(1))}, "9f410827-0000-4000-8000-000000000001.1", ""},
	}
	for _, s := range steps {
		if err := nvmlfake.SetFabric(dir, s.uuid, s.change); err != nil {
			t.Fatal(err)
		}
		d := domain()
		if d.Name != s.name || d.Message != s.message || !d.Fabric {
			t.Errorf("after %+v on %q: domain %q (%s), want %q (%s)", s.change, s.uuid, d.Name, d.Message, s.name, s.message)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// RefreshFabric reads the transitions of a running node without a new
// discovery, and keeps everything else of the node as it was.
func TestRefreshFabric(t *testing.T) {
	dir := t.TempDir()
	lib, err := nvmlfake.New(nvmlfake.Options{Profile: "gb200-tray", NodeName: "tray", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	t.Cleanup(func() { lib.Shutdown() })
	node, err := Discover(context.Background(), lib, "tray")
	if err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.SetFabric(dir, "", nvmlfake.FabricChange{State: "IN_PROGRESS"}); err != nil {
		t.Fatal(err)
	}
	refreshed := RefreshFabric(context.Background(), lib, node)
	if d := refreshed.NVLinkDomain(); d.InDomain() || d.Message != "gpu-0: fabric state IN_PROGRESS" {
		t.Errorf("refreshed domain %+v, want none: the probe is in progress", d)
	}
	if !node.NVLinkDomain().InDomain() {
		t.Error("RefreshFabric changed the node it was given")
	}
	if refreshed.GPUs[1].UUID != node.GPUs[1].UUID || refreshed.GPUs[1].MemoryBytes != node.GPUs[1].MemoryBytes {
		t.Error("RefreshFabric changed more than the fabric")
	}
}
