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
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

func openFakeBackend(t *testing.T, profile, dir string) *Backend {
	t.Helper()
	be, err := Open(context.Background(), Options{Kind: "fake", NodeName: "node-1", FakeProfile: profile, FakeStateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"unknown kind", Options{Kind: "cuda"}, []string{"unknown device backend", `"cuda"`, "nvml, fake"}},
		{"empty kind", Options{}, []string{"unknown device backend", "nvml, fake"}},
		{"unknown profile", Options{Kind: "fake", NodeName: "n", FakeProfile: "dgx-x1", FakeStateDir: dir},
			[]string{`"dgx-x1"`, strings.Join(nvmlfake.Profiles(), ", ")}},
		{"no profile", Options{Kind: "fake", NodeName: "n", FakeStateDir: dir}, []string{"needs a profile", "dgx-a100"}},
		{"no state dir", Options{Kind: "fake", NodeName: "n", FakeProfile: "mixed"}, []string{"needs a state directory"}},
		{"driver root without NVML", Options{Kind: "nvml", NodeName: "n", DriverRoot: dir}, []string{"driver root " + dir, "libnvidia-ml.so.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be, err := Open(context.Background(), tc.opts)
			if err == nil {
				_ = be.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// The backend serves the plugin and the offline tools alike:
			// the flags are the plugin's to name, and a state directory
			// is the caller's (gpudra check's is a throw-away one).
			if strings.Contains(err.Error(), "--") || tc.opts.FakeProfile != "" && strings.Contains(err.Error(), dir) {
				t.Errorf("error %q names a flag or the state directory", err)
			}
		})
	}
}

func TestFakeDiscover(t *testing.T) {
	be := openFakeBackend(t, "mixed", t.TempDir())
	node, err := be.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if node.Name != "node-1" || len(node.GPUs) != 9 || node.GPUs[8].ProductName != "NVIDIA L4" {
		t.Fatalf("node %+v", node)
	}
}

func TestFakeEdits(t *testing.T) {
	be := openFakeBackend(t, "dgx-h100", t.TempDir())
	node, _ := be.Discover(context.Background())
	g := node.GPUs[3]
	want := gpu.Edits{
		Env:         []string{"GPUDRA_FAKE_GPU_3=" + g.UUID},
		DeviceNodes: []gpu.DeviceNode{{Path: "/dev/nvidia3", HostPath: "/dev/null"}},
	}
	if got := be.DeviceEdits(g); !equalEdits(got, want) {
		t.Errorf("DeviceEdits = %+v, want %+v", got, want)
	}
	common := be.CommonEdits(nil)
	if len(common.DeviceNodes) != 1 || common.DeviceNodes[0] != (gpu.DeviceNode{Path: "/dev/nvidiactl", HostPath: "/dev/null"}) {
		t.Errorf("CommonEdits device nodes = %+v, want the /dev/nvidiactl stand-in", common.DeviceNodes)
	}
}

func equalEdits(a, b gpu.Edits) bool {
	return strings.Join(a.Env, ",") == strings.Join(b.Env, ",") && len(a.DeviceNodes) == len(b.DeviceNodes) &&
		(len(a.DeviceNodes) == 0 || a.DeviceNodes[0] == b.DeviceNodes[0]) && len(a.Mounts) == len(b.Mounts)
}

func TestFakeSysfs(t *testing.T) {
	dir := t.TempDir()
	be := openFakeBackend(t, "dgx-b200", dir)
	node, _ := be.Discover(context.Background())
	sysfs := deviceattribute.WithFSFromRoot(filepath.Join(be.SysfsRoot(), "sys"))
	roots, numa := map[string]int{}, map[int64]int{}
	for _, g := range node.GPUs {
		root, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(g.PCIBusID, sysfs)
		if err != nil {
			t.Fatalf("GPU %d pcieRoot: %v", g.Index, err)
		}
		roots[*root.Value.StringValue]++
		n, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(g.PCIBusID, deviceattribute.ScalarAttribute, sysfs)
		if err != nil {
			t.Fatalf("GPU %d numaNode: %v", g.Index, err)
		}
		numa[*n.Value.IntValue]++
		list, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(g.PCIBusID, deviceattribute.ListAttribute, sysfs)
		if err != nil || len(list.Value.IntValues) != 1 || list.Value.IntValues[0] != *n.Value.IntValue {
			t.Errorf("GPU %d NUMA list %v, %v", g.Index, list.Value.IntValues, err)
		}
	}
	// A DGX B200: one host bridge per GPU, GPUs 0-3 on NUMA node 0.
	if len(roots) != 8 || len(numa) != 2 || numa[0] != 4 || numa[1] != 4 {
		t.Errorf("pcieRoots %v, NUMA nodes %v; want 8 roots of 1 GPU, 2 nodes of 4", roots, numa)
	}
	if r, _ := deviceattribute.GetPCIeRootAttributeByPCIBusID(node.GPUs[0].PCIBusID, sysfs); *r.Value.StringValue != "pci0000:18" {
		t.Errorf("GPU 0 pcieRoot %q", *r.Value.StringValue)
	}
	if cpu, err := deviceattribute.GetNUMANodeForCPU(3, sysfs); err != nil || cpu != 1 {
		t.Errorf("CPU 3 NUMA node %d, %v", cpu, err)
	}

	// Reopening with another profile replaces the tree.
	_ = be.Close()
	be2 := openFakeBackend(t, "mixed", dir)
	node2, _ := be2.Discover(context.Background())
	if _, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(node2.GPUs[8].PCIBusID, sysfs); err != nil {
		t.Errorf("GPU 8 of the new profile: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sys", "bus", "pci", "devices"))
	if len(entries) != 9 {
		t.Errorf("%d PCI devices in sysfs, want 9", len(entries))
	}
}

func TestFakeStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	be := openFakeBackend(t, "dgx-h100", dir)
	lib := be.lib // act on the GPUs as an admin would
	d, _ := lib.DeviceGetHandleByIndex(2)
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if _, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 4}); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	_ = be.Close()
	if _, err := be.Discover(context.Background()); err == nil {
		t.Error("Discover after Close succeeded")
	}

	be2 := openFakeBackend(t, "dgx-h100", dir)
	node, _ := be2.Discover(context.Background())
	if !node.GPUs[2].MigEnabled || node.GPUs[1].MigEnabled {
		t.Errorf("MIG enabled after reopen: GPU 2 %v, GPU 1 %v", node.GPUs[2].MigEnabled, node.GPUs[1].MigEnabled)
	}
	d2, _ := be2.lib.DeviceGetHandleByIndex(2)
	if gis, _ := d2.GetGpuInstances(&info); len(gis) != 1 {
		t.Errorf("%d 3g instances after reopen, want 1", len(gis))
	}
}

func TestFakeWatchHealth(t *testing.T) {
	dir := t.TempDir()
	be := openFakeBackend(t, "dgx-a100", dir)
	node, _ := be.Discover(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan gpu.HealthEvent, 1)
	done := make(chan error, 1)
	go func() { done <- be.WatchHealth(ctx, node, HealthOptions{}, events) }()
	target := node.GPUs[6].UUID
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			if ev.UUID != target || ev.Health != gpu.Unhealthy || !strings.Contains(ev.Reason, "XID 95") {
				t.Fatalf("event %+v", ev)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("WatchHealth = %v after cancel", err)
			}
			return
		case <-tick.C:
			// Until the watcher has registered, injected XIDs are history.
			if err := nvmlfake.InjectXID(dir, target, 95); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("no health event")
		}
	}
}

func TestNVMLEdits(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nvidiactl", "nvidia-uvm"} {
		if err := os.WriteFile(filepath.Join(root, "dev", n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The driver root is mounted into the plugin at root; on the host it
	// is /run/nvidia/driver (the GPU Operator's), which the specs name.
	dr := driverRoot{path: root, hostPath: "/run/nvidia/driver"}
	b := &nvmlFiles{devRoot: devRootOf(root), hostDevRoot: dr.onHost(devRootOf(root))}
	common := b.commonEdits()
	if len(common.DeviceNodes) != 2 || common.DeviceNodes[0] != (gpu.DeviceNode{Path: "/dev/nvidiactl", HostPath: "/run/nvidia/driver/dev/nvidiactl"}) {
		t.Errorf("CommonEdits under a driver root = %+v", common.DeviceNodes)
	}
	if got := b.deviceEdits(gpu.GPU{Minor: 5}); got.DeviceNodes[0] != (gpu.DeviceNode{Path: "/dev/nvidia5", HostPath: "/run/nvidia/driver/dev/nvidia5"}) {
		t.Errorf("DeviceEdits = %+v", got.DeviceNodes)
	}
	host := &nvmlFiles{devRoot: devRootOf(t.TempDir()), hostDevRoot: "/"} // no device nodes there: host /dev
	if got := host.deviceEdits(gpu.GPU{Minor: 1}); got.DeviceNodes[0] != (gpu.DeviceNode{Path: "/dev/nvidia1"}) {
		t.Errorf("DeviceEdits with the host dev root = %+v", got.DeviceNodes)
	}
	if host.sysfsRoot() != "/" {
		t.Error("nvml SysfsRoot is not /")
	}
}

func TestFindLibrary(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu", nvmlLibrary)
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findLibrary(root); err != nil || got != lib {
		t.Errorf("findLibrary = %q, %v", got, err)
	}
	// Present but not a library: Init fails and says so.
	_, err := Open(context.Background(), Options{Kind: "nvml", NodeName: "n", DriverRoot: root})
	if err == nil || !strings.Contains(err.Error(), "initialize NVML") {
		t.Errorf("Open over an empty library file = %v", err)
	}
}
