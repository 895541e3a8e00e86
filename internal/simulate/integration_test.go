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

package simulate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOneGPU: a pod asking for one GPU gets exactly one, and its container
// receives that GPU's UUID, a per-device variable and the device nodes.
func TestOneGPU(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, gpuClaim("one", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	devs := allocatedDevices(res)
	if len(devs) != 1 {
		t.Fatalf("allocated %v, want one GPU", devs)
	}
	g, ok := c.Driver.Node().GPUByDeviceName(devs[0])
	if !ok {
		t.Fatalf("allocated device %s is not a GPU of the node", devs[0])
	}
	ctr := res.Containers[0]
	// Visibility is by device nodes; void tells a legacy NVIDIA runtime
	// hook, if the node has one, to add no GPUs of its own.
	if v, _ := ctr.EnvValue("NVIDIA_VISIBLE_DEVICES"); v != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want void", v)
	}
	if v, _ := ctr.EnvValue(fmt.Sprintf("GPUDRA_FAKE_GPU_%d", g.Minor)); v != g.UUID {
		t.Errorf("GPUDRA_FAKE_GPU_%d = %q, want %q", g.Minor, v, g.UUID)
	}
	if v, _ := ctr.EnvValue("NVIDIA_DRIVER_CAPABILITIES"); v != "compute,utility" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %q, want the default compute,utility", v)
	}
	// The driver's libraries (of the fake driver root, named for the
	// version NVML reports) at the distribution's path, and the hook that
	// puts them in the container's ld cache.
	if !slices.ContainsFunc(ctr.Mounts, func(m string) bool { return strings.HasSuffix(m, " -> /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15") }) {
		t.Errorf("mounts %v lack libcuda.so.550.54.15", ctr.Mounts)
	}
	if !slices.ContainsFunc(ctr.Hooks, func(h string) bool { return strings.Contains(h, "nvidia-cdi-hook update-ldcache") }) {
		t.Errorf("hooks %v lack the ld cache update", ctr.Hooks)
	}
	wantNode := fmt.Sprintf("/dev/nvidia%d", g.Minor)
	if !slices.Contains(ctr.DeviceNodes, wantNode) || !slices.Contains(ctr.DeviceNodes, "/dev/nvidiactl") {
		t.Errorf("device nodes %v, want %s and /dev/nvidiactl", ctr.DeviceNodes, wantNode)
	}
	for _, d := range ctr.DeviceNodes {
		if strings.HasPrefix(d, "/dev/nvidia") && d != wantNode && d != "/dev/nvidiactl" && !strings.HasPrefix(d, "/dev/nvidia-uvm") {
			t.Errorf("container got device node %s of another GPU", d)
		}
	}
}

// TestTwoPodsGetDifferentGPUs: the allocator never hands one GPU to two
// claims.
func TestTwoPodsGetDifferentGPUs(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	a, err := createAndRun(ctx, t, c, gpuClaim("a", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := createAndRun(ctx, t, c, gpuClaim("b", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	ua, ub := a.Containers[0].FakeDevices(), b.Containers[0].FakeDevices()
	if len(ua) != 1 || len(ub) != 1 || ua[0] == ub[0] {
		t.Fatalf("two pods got GPUs %v and %v, want two different GPUs", ua, ub)
	}
}

// TestEightGPUsOneNVLinkIsland: matchAttribute on nvlinkGroup keeps a
// multi-GPU claim on one island, and fails cleanly where no island has
// enough free GPUs.
func TestEightGPUsOneNVLinkIsland(t *testing.T) {
	const group = "gpu.gpudra.io/nvlinkGroup"
	t.Run("dgx-h100 idle: all eight, one island", func(t *testing.T) {
		ctx, c := startCluster(t, "dgx-h100")
		res, err := createAndRun(ctx, t, c, gpuClaim("eight", 8, group))
		if err != nil {
			t.Fatal(err)
		}
		assertOneIsland(t, c, allocatedDevices(res), 8)
		if got := res.Containers[0].FakeDevices(); len(got) != 8 {
			t.Errorf("container sees GPUs %v, want 8", got)
		}
	})
	t.Run("mixed: four on one island", func(t *testing.T) {
		ctx, c := startCluster(t, "mixed")
		res, err := createAndRun(ctx, t, c, gpuClaim("four", 4, group))
		if err != nil {
			t.Fatal(err)
		}
		assertOneIsland(t, c, allocatedDevices(res), 4)
	})
	t.Run("mixed: no island has eight", func(t *testing.T) {
		ctx, c := startCluster(t, "mixed")
		_, err := createAndRun(ctx, t, c, gpuClaim("eight", 8, group))
		if !errors.Is(err, ErrUnschedulable) {
			t.Fatalf("err = %v, want ErrUnschedulable", err)
		}
		assertNothingPrepared(t, c)
	})
	t.Run("dgx-h100 with one GPU in use: no island has eight free", func(t *testing.T) {
		ctx, c := startCluster(t, "dgx-h100")
		if _, err := createAndRun(ctx, t, c, gpuClaim("one", 1, "")); err != nil {
			t.Fatal(err)
		}
		_, err := createAndRun(ctx, t, c, gpuClaim("eight", 8, group))
		if !errors.Is(err, ErrUnschedulable) {
			t.Fatalf("err = %v, want ErrUnschedulable", err)
		}
	})
}

func assertOneIsland(t *testing.T, c *Cluster, devs []string, want int) {
	t.Helper()
	if len(devs) != want {
		t.Fatalf("allocated %d devices %v, want %d", len(devs), devs, want)
	}
	groups := map[int]bool{}
	for _, d := range devs {
		g, ok := c.Driver.Node().GPUByDeviceName(d)
		if !ok {
			t.Fatalf("allocated %s is not a GPU", d)
		}
		groups[g.NVLinkGroup] = true
	}
	if len(groups) != 1 {
		t.Errorf("devices %v span NVLink groups %v, want one", devs, groups)
	}
}

func assertNothingPrepared(t *testing.T, c *Cluster) {
	t.Helper()
	if n := len(c.Driver.State().PreparedClaims()); n != 0 {
		t.Errorf("%d claims prepared, want none", n)
	}
	entries, _ := os.ReadDir(c.Opts.CDIDir())
	for _, e := range entries {
		t.Errorf("CDI spec %s left behind", e.Name())
	}
}

// TestCELSelectors: selectors on capacity.memory and productName pick the
// right GPUs on a mixed node, and a selector nothing satisfies is
// unschedulable.
func TestCELSelectors(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		count    int64
		want     func(product string, memGiB uint64) bool
		unsched  bool
	}{
		{
			name:     "memory >= 79Gi picks only the H100s",
			selector: "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('79Gi')) >= 0",
			count:    4,
			want:     func(p string, m uint64) bool { return m >= 79 },
		},
		{
			// An H100 80GB reports 81559Mi through NVML, as the fake
			// does: "80Gi" matches no real H100.
			name:     "no H100 has 80Gi",
			selector: "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('80Gi')) >= 0",
			count:    1,
			unsched:  true,
		},
		{
			name:     "memory >= 40Gi excludes the small GPU",
			selector: "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0",
			count:    8,
			want:     func(p string, m uint64) bool { return m >= 40 },
		},
		{
			name:     "productName prefix",
			selector: "device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA A100')",
			count:    4,
			want:     func(p string, m uint64) bool { return strings.HasPrefix(p, "NVIDIA A100") },
		},
		{
			name:     "five H100s do not exist",
			selector: "device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA H100')",
			count:    5,
			unsched:  true,
		},
		{
			name:     "no GPU has 200Gi",
			selector: "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('200Gi')) >= 0",
			count:    1,
			unsched:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := startCluster(t, "mixed")
			res, err := createAndRun(ctx, t, c, gpuClaim("sel", tc.count, "", tc.selector))
			if tc.unsched {
				if !errors.Is(err, ErrUnschedulable) {
					t.Fatalf("err = %v, want ErrUnschedulable", err)
				}
				assertNothingPrepared(t, c)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			devs := allocatedDevices(res)
			if int64(len(devs)) != tc.count {
				t.Fatalf("allocated %v, want %d devices", devs, tc.count)
			}
			for _, d := range devs {
				g, _ := c.Driver.Node().GPUByDeviceName(d)
				if !tc.want(g.ProductName, g.MemoryBytes>>30) {
					t.Errorf("selector picked %s (%s, %d GiB), which it should not match", d, g.ProductName, g.MemoryBytes>>30)
				}
			}
		})
	}
}

// TestSharedClaim: two pods that reference one claim see the same GPU, and
// the claim is prepared once.
func TestSharedClaim(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	if _, err := c.CreateClaim(ctx, gpuClaim("shared", 1, "")); err != nil {
		t.Fatal(err)
	}
	a, err := c.RunPod(ctx, podUsing("a", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.RunPod(ctx, podUsing("b", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	ua, ub := a.Containers[0].FakeDevices(), b.Containers[0].FakeDevices()
	if len(ua) != 1 || !slices.Equal(ua, ub) {
		t.Fatalf("pods sharing a claim see %v and %v, want the same GPU", ua, ub)
	}
	if n := len(c.Driver.State().PreparedClaims()); n != 1 {
		t.Errorf("%d claims prepared, want 1", n)
	}
}
