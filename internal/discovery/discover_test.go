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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

var busIDPattern = regexp.MustCompile(`^0000:[0-9a-f]{2}:00\.0$`)

func fake(t *testing.T, profile string) *nvmlfake.Server {
	t.Helper()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: profile, NodeName: "node-1", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ret := s.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}

// want is what every GPU of a model must look like.
type want struct {
	name, arch, cc    string
	memory            uint64
	sms               int
	migCapable        bool
	nvlinkGroupOfGPU0 int
}

var (
	a100 = want{"NVIDIA A100-SXM4-40GB", "Ampere", "8.0", 40960 << 20, 108, true, 0}
	h100 = want{"NVIDIA H100 80GB HBM3", "Hopper", "9.0", 81559 << 20, 132, true, 0}
	h200 = want{"NVIDIA H200", "Hopper", "9.0", 143771 << 20, 132, true, 0}
	b200 = want{"NVIDIA B200", "Blackwell", "10.0", 183359 << 20, 148, true, 0}
	l4   = want{"NVIDIA L4", "Ada Lovelace", "8.9", 23034 << 20, 58, false, 0}
)

func TestDiscoverProfiles(t *testing.T) {
	tests := []struct {
		profile string
		driver  string
		cuda    string
		gpus    []want
		groups  []int
	}{
		{"dgx-a100", "550.54.15", "12.4", repeat(a100, 8), make([]int, 8)},
		{"dgx-h100", "550.54.15", "12.4", repeat(h100, 8), make([]int, 8)},
		{"dgx-h200", "550.54.15", "12.4", repeat(h200, 8), make([]int, 8)},
		{"dgx-b200", "570.124.06", "12.8", repeat(b200, 8), make([]int, 8)},
		{"mixed", "550.54.15", "12.4", append(append(repeat(h100, 4), repeat(a100, 4)...), l4), []int{0, 0, 0, 0, 4, 4, 4, 4, 8}},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			node, err := Discover(context.Background(), fake(t, tc.profile), "node-1")
			if err != nil {
				t.Fatal(err)
			}
			if node.Name != "node-1" || node.DriverVersion != tc.driver || node.CUDADriverVersion != tc.cuda {
				t.Errorf("node %q driver %q CUDA %q", node.Name, node.DriverVersion, node.CUDADriverVersion)
			}
			if len(node.GPUs) != len(tc.gpus) {
				t.Fatalf("%d GPUs, want %d", len(node.GPUs), len(tc.gpus))
			}
			seen := map[string]bool{}
			for i, g := range node.GPUs {
				w := tc.gpus[i]
				if g.Index != i || g.Minor != i || !strings.HasPrefix(g.UUID, "GPU-") || seen[g.UUID] || seen[g.PCIBusID] {
					t.Errorf("GPU %d identity: index %d minor %d UUID %q bus %q", i, g.Index, g.Minor, g.UUID, g.PCIBusID)
				}
				seen[g.UUID], seen[g.PCIBusID] = true, true
				if g.ProductName != w.name || g.Architecture != w.arch || g.CUDAComputeCapability != w.cc || g.Brand != "Nvidia" {
					t.Errorf("GPU %d: %q %q %q %q", i, g.ProductName, g.Architecture, g.CUDAComputeCapability, g.Brand)
				}
				if g.MemoryBytes != w.memory || g.Multiprocessors != w.sms {
					t.Errorf("GPU %d: memory %d SMs %d, want %d, %d", i, g.MemoryBytes, g.Multiprocessors, w.memory, w.sms)
				}
				if g.MigCapable != w.migCapable || g.MigEnabled {
					t.Errorf("GPU %d: MIG capable %v enabled %v", i, g.MigCapable, g.MigEnabled)
				}
				if !busIDPattern.MatchString(g.PCIBusID) {
					t.Errorf("GPU %d: PCI bus ID %q is not canonical", i, g.PCIBusID)
				}
				if g.NVLinkGroup != tc.groups[i] {
					t.Errorf("GPU %d: NVLink group %d, want %d", i, g.NVLinkGroup, tc.groups[i])
				}
			}
		})
	}
}

func repeat(w want, n int) []want {
	out := make([]want, n)
	for i := range out {
		out[i] = w
	}
	return out
}

func TestDiscoverMIGEnabled(t *testing.T) {
	s := fake(t, "mixed")
	for _, i := range []int{0, 5} {
		d, _ := s.DeviceGetHandleByIndex(i)
		d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	}
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	h, a := node.GPUs[0], node.GPUs[5]
	// NVML cannot count cores with MIG on: the 7g profile's SMs stand in.
	if !h.MigEnabled || h.Multiprocessors != 132 {
		t.Errorf("H100 with MIG on: enabled %v, SMs %d; want true, 132 (the 7g.80gb profile's)", h.MigEnabled, h.Multiprocessors)
	}
	// Ampere's change is pending until a reset: still off, all SMs.
	if a.MigEnabled || a.Multiprocessors != 108 {
		t.Errorf("A100 with MIG pending: enabled %v, SMs %d; want false, 108", a.MigEnabled, a.Multiprocessors)
	}
}

func TestDiscoverErrorsNameTheGPU(t *testing.T) {
	s := fake(t, "dgx-h100")
	d := s.Server.Devices[3].(*server.Device)
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
	_, err := Discover(context.Background(), s, "n")
	if err == nil || !strings.Contains(err.Error(), "GPU 3: get memory") {
		t.Fatalf("error %v, want it to name GPU 3 and the query", err)
	}
}

// TestDiscoverSkipsLostGPU: a GPU that falls off the bus, before or during
// discovery, is left out; the others are discovered as usual.
func TestDiscoverSkipsLostGPU(t *testing.T) {
	s := fake(t, "dgx-h100")
	d := s.Server.Devices[3].(*server.Device)
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	lostUUID, _ := d.GetUUID()
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(node.GPUs) != 7 {
		t.Fatalf("%d GPUs, want 7", len(node.GPUs))
	}
	for i, g := range node.GPUs {
		if g.UUID == lostUUID {
			t.Errorf("the lost GPU was discovered")
		}
		want := i
		if i >= 3 {
			want = i + 1
		}
		if g.Index != want {
			t.Errorf("GPU %d has index %d, want %d (indices are NVML's)", i, g.Index, want)
		}
	}
}

func TestDiscoverUninitialized(t *testing.T) {
	s, _ := nvmlfake.New(nvmlfake.Options{Profile: "dgx-h100", NodeName: "n"})
	if _, err := Discover(context.Background(), s, "n"); err == nil {
		t.Fatal("Discover over an uninitialized library succeeded")
	}
}

func TestCanonicalBusID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"00000000:1B:00.0", "0000:1b:00.0"},
		{"0000:1b:00.0", "0000:1b:00.0"},
		{"00000001:C3:1F.7", "0001:c3:1f.7"},
		{"1b:00.0", ""},
		{"0000:1g:00.0", ""},
		{"0000:1b:00", ""},
	}
	for _, tc := range tests {
		got, err := canonicalBusID(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("canonicalBusID(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := cudaVersion(12040); got != "12.4" {
		t.Errorf("cudaVersion(12040) = %q", got)
	}
	if got := cudaVersion(12100); got != "12.10" {
		t.Errorf("cudaVersion(12100) = %q", got)
	}
	for arch, want := range map[nvml.DeviceArchitecture]string{
		nvml.DEVICE_ARCH_AMPERE: "Ampere", nvml.DEVICE_ARCH_ADA: "Ada Lovelace", nvml.DEVICE_ARCH_HOPPER: "Hopper",
		nvml.DEVICE_ARCH_BLACKWELL: "Blackwell", nvml.DEVICE_ARCH_VOLTA: "Volta", nvml.DEVICE_ARCH_UNKNOWN: "Unknown",
	} {
		if got := architectureName(arch); got != want {
			t.Errorf("architectureName(%d) = %q, want %q", arch, got, want)
		}
	}
	for b, want := range map[nvml.BrandType]string{nvml.BRAND_NVIDIA: "Nvidia", nvml.BRAND_TESLA: "Tesla", nvml.BRAND_GEFORCE_RTX: "GeForceRTX"} {
		if got := brandName(b); got != want {
			t.Errorf("brandName(%d) = %q, want %q", b, got, want)
		}
	}
	for cc, want := range map[[2]int]int{{7, 0}: 64, {8, 0}: 64, {8, 6}: 128, {8, 9}: 128, {9, 0}: 128, {10, 0}: 128, {12, 0}: 128, {3, 5}: 0} {
		if got := coresPerSM(cc[0], cc[1]); got != want {
			t.Errorf("coresPerSM(%v) = %d, want %d", cc, got, want)
		}
	}
}

// TestEveryModelHasArchitectureName: discovery names the architecture of
// every model of the fake catalog, so a model of a new architecture cannot
// be added without its case in architectureName (names.go): the attribute
// would read "Unknown" on real GPUs of it too.
func TestEveryModelHasArchitectureName(t *testing.T) {
	var b strings.Builder
	b.WriteString("gpus:\n")
	for _, m := range nvmlfake.Models() {
		fmt.Fprintf(&b, "- model: %s\n", m)
	}
	path := filepath.Join(t.TempDir(), "every-model.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	node, err := Discover(context.Background(), fake(t, path), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(node.GPUs) != len(nvmlfake.Models()) {
		t.Fatalf("%d GPUs discovered, want one per model (%d)", len(node.GPUs), len(nvmlfake.Models()))
	}
	for _, g := range node.GPUs {
		if g.Architecture == "" || strings.HasPrefix(g.Architecture, "Unknown") {
			t.Errorf("%s: architecture %q: add its nvml.DEVICE_ARCH_* to architectureName (internal/discovery/names.go)", g.ProductName, g.Architecture)
		}
	}
}
