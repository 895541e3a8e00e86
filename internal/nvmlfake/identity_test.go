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
	"regexp"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var (
	gpuUUIDPattern  = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	nvmlBusPattern  = regexp.MustCompile(`^00000000:[0-9A-F]{2}:00\.0$`)
	legacyBusPatten = regexp.MustCompile(`^0000:[0-9A-F]{2}:00\.0$`)
)

func uuids(t *testing.T, s *Server) []string {
	t.Helper()
	n, _ := s.DeviceGetCount()
	out := make([]string, n)
	for i := range out {
		u, ret := device(t, s, i).GetUUID()
		if ret != nvml.SUCCESS {
			t.Fatalf("GetUUID: %v", ret)
		}
		out[i] = u
	}
	return out
}

func TestUUIDsStablePerNode(t *testing.T) {
	a1 := uuids(t, start(t, "dgx-h100", "node-a", t.TempDir()))
	a2 := uuids(t, start(t, "dgx-h100", "node-a", t.TempDir()))
	b := uuids(t, start(t, "dgx-h100", "node-b", ""))

	seen := map[string]bool{}
	for i := range a1 {
		if !gpuUUIDPattern.MatchString(a1[i]) {
			t.Errorf("GPU %d UUID %q is not GPU-<uuid>", i, a1[i])
		}
		if a1[i] != a2[i] {
			t.Errorf("GPU %d UUID differs between two servers of node-a: %s, %s", i, a1[i], a2[i])
		}
		if seen[a1[i]] {
			t.Errorf("GPU %d UUID %s repeats on one node", i, a1[i])
		}
		seen[a1[i]] = true
	}
	for i := range b {
		if seen[b[i]] {
			t.Errorf("node-b GPU %d has node-a's UUID %s", i, b[i])
		}
	}
}

func TestPCIInfo(t *testing.T) {
	s := start(t, "mixed", "n", "")
	n, _ := s.DeviceGetCount()
	seen := map[string]bool{}
	for i := range n {
		d := device(t, s, i)
		p, ret := d.GetPciInfo()
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		bus, legacy := cString(p.BusId[:]), cString(p.BusIdLegacy[:])
		if !nvmlBusPattern.MatchString(bus) || !legacyBusPatten.MatchString(legacy) || legacy != bus[4:] {
			t.Errorf("GPU %d bus IDs %q, %q", i, bus, legacy)
		}
		if seen[bus] {
			t.Errorf("GPU %d bus ID %s repeats", i, bus)
		}
		seen[bus] = true
		if p.Domain != 0 || p.Device != 0 || p.Bus == 0 || p.PciDeviceId&0xFFFF != 0x10DE || p.PciSubSystemId&0xFFFF != 0x10DE {
			t.Errorf("GPU %d PCI info %+v", i, p)
		}
		if minor, _ := d.GetMinorNumber(); minor != i {
			t.Errorf("GPU %d minor = %d", i, minor)
		}
		for _, spelling := range []string{bus, legacy, legacy[5:], s.PCIeSlots()[i].BusID} {
			got, ret := s.DeviceGetHandleByPciBusId(spelling)
			if ret != nvml.SUCCESS || got != d {
				t.Errorf("DeviceGetHandleByPciBusId(%q) = %v, %v; want GPU %d", spelling, got, ret, i)
			}
		}
	}
	if _, ret := s.DeviceGetHandleByPciBusId("0000:ff:00.0"); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("unknown bus ID: %v, want ERROR_NOT_FOUND", ret)
	}
	if _, ret := s.DeviceGetHandleByPciBusId("garbage"); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("malformed bus ID: %v, want ERROR_INVALID_ARGUMENT", ret)
	}
}

func cString(b []int8) string {
	var out []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

func TestCoreCounts(t *testing.T) {
	tests := []struct {
		profile string
		index   int
		cores   int
		cc      [2]int
	}{
		{"dgx-a100", 0, 108 * 64, [2]int{8, 0}},
		{"dgx-h100", 0, 132 * 128, [2]int{9, 0}},
		{"dgx-h200", 0, 132 * 128, [2]int{9, 0}},
		{"dgx-b200", 0, 148 * 128, [2]int{10, 0}},
		{"mixed", 8, 58 * 128, [2]int{8, 9}},
	}
	for _, tc := range tests {
		s := start(t, tc.profile, "n", "")
		d := device(t, s, tc.index)
		if cores, ret := d.GetNumGpuCores(); cores != tc.cores || ret != nvml.SUCCESS {
			t.Errorf("%s GPU %d cores = %d, %v; want %d", tc.profile, tc.index, cores, ret, tc.cores)
		}
		if ma, mi, _ := d.GetCudaComputeCapability(); ma != tc.cc[0] || mi != tc.cc[1] {
			t.Errorf("%s GPU %d compute capability %d.%d, want %v", tc.profile, tc.index, ma, mi, tc.cc)
		}
	}
}

// TestPCIeLayout: the slots agree with NVML's bus IDs; without placements
// in the profile, GPUs go two per root complex over two NUMA nodes.
func TestPCIeLayout(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "eight.yaml")
	if err := os.WriteFile(file, []byte("gpus:\n"+strings.Repeat("- model: h100-sxm5-80gb\n", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, file, "n", "")
	roots, numa := map[string]int{}, map[int]int{}
	for i, slot := range s.PCIeSlots() {
		roots[slot.RootComplex]++
		numa[slot.NUMANode]++
		p, _ := device(t, s, i).GetPciInfo()
		if got := "0000:" + lower(cString(p.BusId[:])[9:]); got != slot.BusID {
			t.Errorf("GPU %d: slot bus %s, NVML bus %s", i, slot.BusID, got)
		}
	}
	if len(roots) != 4 || len(numa) != 2 || numa[0] != 4 {
		t.Errorf("roots %v, NUMA nodes %v; want 4 roots of 2 GPUs and 2 NUMA nodes of 4", roots, numa)
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
