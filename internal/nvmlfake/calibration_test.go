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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
)

// calibration is one testdata/calibration/<model>.yaml file: public
// evidence of what a real GPU reports, each fact with its source (see the
// README there).
type calibration struct {
	Model   string            `json:"model"`
	Sources map[string]source `json:"sources"`
	GPU     struct {
		ProductName       *fact[string] `json:"productName"`
		Brand             *fact[string] `json:"brand"`
		Architecture      *fact[string] `json:"architecture"`
		PCIDeviceID       *fact[string] `json:"pciDeviceID"`
		PCISubsystemID    *fact[string] `json:"pciSubsystemID"`
		MemoryTotalMiB    *fact[uint64] `json:"memoryTotalMiB"`
		ComputeCapability *fact[string] `json:"computeCapability"`
		Multiprocessors   *fact[int]    `json:"multiprocessors"`
		NVLinks           *fact[int]    `json:"nvlinks"`
	} `json:"gpu"`
	// Fabric is nvidia-smi -q's <fabric> block: state, status, cliqueId,
	// clusterUuid, health summary, in nvidia-smi's words ("N/A" for a
	// GPU that answers ERROR_NOT_SUPPORTED).
	Fabric *struct {
		State         string `json:"state"`
		Status        string `json:"status"`
		CliqueID      uint32 `json:"cliqueId"`
		ClusterUUID   string `json:"clusterUuid"`
		HealthSummary string `json:"healthSummary"`
		Source        string `json:"source"`
		Inferred      string `json:"inferred"`
	} `json:"fabric"`
	// Platform is nvidia-smi -q's <platformInfo> block of one board's
	// GPUs, module IDs in minor-number order.
	Platform *struct {
		ChassisSerial string `json:"chassisSerial"`
		SlotNumber    uint8  `json:"slotNumber"`
		TrayIndex     uint8  `json:"trayIndex"`
		HostID        uint8  `json:"hostID"`
		ModuleIDs     []int  `json:"moduleIDs"`
		Source        string `json:"source"`
	} `json:"platform"`
	MIG *struct {
		Source           string       `json:"source"`
		PlacementsSource string       `json:"placementsSource"`
		Profiles         []lgipRecord `json:"profiles"`
	} `json:"mig"`
	Disagreements []string `json:"disagreements"`
}

type source struct {
	Ref  string `json:"ref"`
	Says string `json:"says"`
}

type fact[T any] struct {
	Value  T      `json:"value"`
	Source string `json:"source"`
}

// lgipRecord is one nvidia-smi mig -lgip row and its -lgipp placements.
type lgipRecord struct {
	Name       string `json:"name"`
	ID         uint32 `json:"id"`
	Instances  uint32 `json:"instances"`
	MemoryGiB  string `json:"memoryGiB"`
	SM         uint32 `json:"sm"`
	Dec        uint32 `json:"dec"`
	Enc        uint32 `json:"enc"`
	CE         uint32 `json:"ce"`
	JPEG       uint32 `json:"jpeg"`
	OFA        uint32 `json:"ofa"`
	Placements string `json:"placements"`
	Source     string `json:"source"`
	Inferred   string `json:"inferred"`
}

// nvidiaSMINames are nvidia-smi's spellings of NVML's enums.
var (
	smiBrands = map[string]nvml.BrandType{"NVIDIA": nvml.BRAND_NVIDIA, "Tesla": nvml.BRAND_TESLA}
	smiArchs  = map[string]nvml.DeviceArchitecture{
		"Ampere": nvml.DEVICE_ARCH_AMPERE, "Ada Lovelace": nvml.DEVICE_ARCH_ADA,
		"Hopper": nvml.DEVICE_ARCH_HOPPER, "Blackwell": nvml.DEVICE_ARCH_BLACKWELL,
	}
	refPattern = regexp.MustCompile(`^(https://\S+|[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+|code-index:\d+)$`)
)

func loadCalibration(t *testing.T, modelKey string) calibration {
	t.Helper()
	path := filepath.Join("testdata", "calibration", modelKey+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("model %s has no calibration evidence: %v (every model needs one; see testdata/calibration/README.md)", modelKey, err)
	}
	var c calibration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if c.Model != modelKey {
		t.Fatalf("%s: model %q, want %q", path, c.Model, modelKey)
	}
	for id, s := range c.Sources {
		if !refPattern.MatchString(s.Ref) || s.Says == "" {
			t.Errorf("%s: source %s: ref %q must be a URL, owner/repo@commit:path or code-index:<id>, and says must say what it shows", path, id, s.Ref)
		}
	}
	return c
}

// checkSource fails unless id names one of the file's sources.
func (c calibration) checkSource(t *testing.T, what, id string) {
	t.Helper()
	if _, ok := c.Sources[id]; !ok {
		t.Errorf("%s: %s cites source %q, which the file does not list", c.Model, what, id)
	}
}

// oneGPU starts a fake with one GPU of the model.
func oneGPU(t *testing.T, modelKey string) *Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.yaml")
	if err := os.WriteFile(path, []byte("gpus:\n- model: "+modelKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, path, "calibration", "")
}

// TestCalibration compares, for every model of the catalog, what the fake
// answers through NVML with the public evidence of what the real GPU
// answers (testdata/calibration/<model>.yaml). Every fact there is
// checked, and every fact cites a source.
func TestCalibration(t *testing.T) {
	for _, key := range Models() {
		t.Run(key, func(t *testing.T) {
			c := loadCalibration(t, key)
			s := oneGPU(t, key)
			d, _ := s.DeviceGetHandleByIndex(0)
			g := c.GPU
			check := func(what, src string, got, want any) {
				t.Helper()
				c.checkSource(t, what, src)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: fake says %v, real GPU %v (source %s)", what, got, want, src)
				}
			}
			if f := g.ProductName; f != nil {
				name, _ := d.GetName()
				check("productName", f.Source, name, f.Value)
			}
			if f := g.Brand; f != nil {
				b, _ := d.GetBrand()
				check("brand", f.Source, b, smiBrands[f.Value])
			}
			if f := g.Architecture; f != nil {
				a, _ := d.GetArchitecture()
				check("architecture", f.Source, a, smiArchs[f.Value])
			}
			pci, _ := d.GetPciInfo()
			if f := g.PCIDeviceID; f != nil {
				check("pciDeviceID", f.Source, fmt.Sprintf("0x%08X", pci.PciDeviceId), f.Value)
			}
			if f := g.PCISubsystemID; f != nil {
				check("pciSubsystemID", f.Source, fmt.Sprintf("0x%08X", pci.PciSubSystemId), f.Value)
			}
			if f := g.MemoryTotalMiB; f != nil {
				mem, _ := d.GetMemoryInfo()
				check("memoryTotalMiB", f.Source, mem.Total>>20, f.Value)
				if mem.Total%(1<<20) != 0 {
					t.Errorf("memory total %d is not whole MiB", mem.Total)
				}
			}
			if f := g.ComputeCapability; f != nil {
				major, minor, _ := d.GetCudaComputeCapability()
				check("computeCapability", f.Source, fmt.Sprintf("%d.%d", major, minor), f.Value)
			}
			node, err := discovery.Discover(context.Background(), s, "calibration")
			if err != nil {
				t.Fatal(err)
			}
			if f := g.Multiprocessors; f != nil {
				check("multiprocessors (through discovery)", f.Source, node.GPUs[0].Multiprocessors, f.Value)
			}
			if f := g.NVLinks; f != nil {
				check("nvlinks", f.Source, countLinks(d), f.Value)
			}
			checkMIG(t, c, d, node.GPUs[0].MIG)
			checkFabric(t, c, d)
			checkPlatform(t, c, key)
		})
	}
}

// smiFabricStates and smiFabricHealth are nvidia-smi's words for NVML's
// fabric enums.
var (
	smiFabricStates = map[uint8]string{
		nvml.GPU_FABRIC_STATE_NOT_SUPPORTED: "N/A", nvml.GPU_FABRIC_STATE_NOT_STARTED: "Not Started",
		nvml.GPU_FABRIC_STATE_IN_PROGRESS: "In Progress", nvml.GPU_FABRIC_STATE_COMPLETED: "Completed",
	}
	smiFabricHealth = map[uint8]string{
		nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED: "N/A", nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY: "Healthy",
		nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY: "Unhealthy", nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY: "Limited Capacity",
	}
)

// checkFabric compares the fake's fabric reading, through the _v4 and the
// v1 calls, with the <fabric> block of the evidence. Every model has one.
func checkFabric(t *testing.T, c calibration, d nvml.Device) {
	t.Helper()
	f := c.Fabric
	if f == nil {
		t.Errorf("%s: no fabric evidence (every model needs nvidia-smi -q's <fabric> block)", c.Model)
		return
	}
	c.checkSource(t, "fabric", f.Source)
	v4, ret := d.GetGpuFabricInfo_v4()
	v1, ret1 := d.GetGpuFabricInfo()
	if f.State == "N/A" {
		if ret != nvml.ERROR_NOT_SUPPORTED || ret1 != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("fabric: the real GPU shows N/A; the fake answers %v (v4), %v (v1), want ERROR_NOT_SUPPORTED", ret, ret1)
		}
		return
	}
	if ret != nvml.SUCCESS || ret1 != nvml.SUCCESS {
		t.Fatalf("fabric: %v (v4), %v (v1)", ret, ret1)
	}
	got := fmt.Sprintf("state %s, status %s, cliqueId %d, clusterUuid %s, health %s",
		smiFabricStates[v4.State], smiReturn(v4.Status), v4.Cliques[0].Id, uuidString(v4.ClusterUuid), smiFabricHealth[v4.HealthSummary])
	want := fmt.Sprintf("state %s, status %s, cliqueId %d, clusterUuid %s, health %s", f.State, f.Status, f.CliqueID, f.ClusterUUID, f.HealthSummary)
	if got != want {
		t.Errorf("fabric (v4): fake says %s; real GPU %s (source %s)", got, want, f.Source)
	}
	if v4.NumCliques != 1 || v4.Cliques[0].Type != nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER {
		t.Errorf("fabric (v4): cliques %d, first of type %d; want the clique ID as the one UNICAST_POINTER entry", v4.NumCliques, v4.Cliques[0].Type)
	}
	if v1.State != v4.State || v1.CliqueId != v4.Cliques[0].Id || v1.ClusterUuid != v4.ClusterUuid || v1.Status != v4.Status {
		t.Errorf("fabric: v1 %+v disagrees with v4 %+v", v1, v4)
	}
}

// checkPlatform compares nvmlDeviceGetPlatformInfo and GetModuleId on a
// board of the model's GPUs with the <platformInfo> evidence; a model
// without it must answer ERROR_NOT_SUPPORTED.
func checkPlatform(t *testing.T, c calibration, modelKey string) {
	t.Helper()
	p := c.Platform
	n := 1
	if p != nil {
		c.checkSource(t, "platform", p.Source)
		n = len(p.ModuleIDs)
	}
	path := filepath.Join(t.TempDir(), "board.yaml")
	if err := os.WriteFile(path, []byte("gpus:\n"+strings.Repeat("- model: "+modelKey+"\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, path, "calibration", "")
	for i := range n {
		d, _ := s.DeviceGetHandleByIndex(i)
		info, ret := d.GetPlatformInfo()
		module, mret := d.GetModuleId()
		if p == nil {
			if ret != nvml.ERROR_NOT_SUPPORTED || mret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("platform: no evidence, but the fake answers %v, %v", ret, mret)
			}
			continue
		}
		if ret != nvml.SUCCESS || mret != nvml.SUCCESS {
			t.Fatalf("GPU %d platform: %v, module ID: %v", i, ret, mret)
		}
		got := fmt.Sprintf("chassis %s, slot %d, tray %d, host %d, module %d/%d", cBytes(info.ChassisSerialNumber[:]),
			info.SlotNumber, info.TrayIndex, info.HostId, info.ModuleId, module)
		want := fmt.Sprintf("chassis %s, slot %d, tray %d, host %d, module %d/%d", p.ChassisSerial, p.SlotNumber, p.TrayIndex, p.HostID, p.ModuleIDs[i], p.ModuleIDs[i])
		if got != want {
			t.Errorf("GPU %d platform: fake says %s; real GPU %s (source %s)", i, got, want, p.Source)
		}
	}
}

func smiReturn(status uint32) string {
	if nvml.Return(status) == nvml.SUCCESS {
		return "Success"
	}
	return nvml.Return(status).Error()
}

func uuidString(b [16]uint8) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func cBytes(b []uint8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

// countLinks is how many NVLink links the GPU answers for.
func countLinks(d nvml.Device) int {
	n := 0
	for link := range 64 {
		if _, ret := d.GetNvLinkState(link); ret != nvml.SUCCESS {
			break
		}
		n++
	}
	return n
}

// checkMIG compares the GPU instance profiles row by row: the fake must
// offer exactly the profiles the evidence lists, with the same ID,
// instance count, memory as nvidia-smi prints it, SMs, engines and
// placements, and discovery must name each as nvidia-smi does.
func checkMIG(t *testing.T, c calibration, d nvml.Device, discovered *gpu.MIG) {
	t.Helper()
	var fakeIDs []uint32
	infos := map[uint32]nvml.GpuInstanceProfileInfo{}
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		if info, ret := d.GetGpuInstanceProfileInfo(index); ret == nvml.SUCCESS {
			fakeIDs = append(fakeIDs, info.Id)
			infos[info.Id] = info
		}
	}
	if c.MIG == nil {
		if len(fakeIDs) > 0 {
			t.Errorf("the fake offers MIG profiles %v; the evidence lists none", fakeIDs)
		}
		return
	}
	c.checkSource(t, "mig", c.MIG.Source)
	c.checkSource(t, "mig placements", c.MIG.PlacementsSource)
	var wantIDs []uint32
	names := map[uint32]string{}
	if discovered != nil {
		for _, p := range discovered.Profiles {
			names[p.ID] = p.Name
		}
	}
	for _, r := range c.MIG.Profiles {
		wantIDs = append(wantIDs, r.ID)
		if r.Source != "" {
			c.checkSource(t, r.Name, r.Source)
		}
		info, ok := infos[r.ID]
		if !ok {
			t.Errorf("%s (ID %d): the fake does not offer it", r.Name, r.ID)
			continue
		}
		got := lgipRecord{
			Name: names[r.ID], ID: info.Id, Instances: info.InstanceCount,
			MemoryGiB: strconv.FormatFloat(float64(info.MemorySizeMB)/1024, 'f', 2, 64),
			SM:        info.MultiprocessorCount, Dec: info.DecoderCount, Enc: info.EncoderCount,
			CE: info.CopyEngineCount, JPEG: info.JpegCount, OFA: info.OfaCount,
			Placements: lgipp(t, d, &info), Source: r.Source, Inferred: r.Inferred,
		}
		if got != r {
			t.Errorf("%s: fake's nvidia-smi mig -lgip/-lgipp row\n got %+v\nwant %+v", r.Name, got, r)
		}
	}
	slices.Sort(fakeIDs)
	slices.Sort(wantIDs)
	if !slices.Equal(fakeIDs, wantIDs) {
		t.Errorf("profile IDs: fake %v, evidence %v", fakeIDs, wantIDs)
	}
}

// lgipp formats a profile's placements as nvidia-smi mig -lgipp does:
// "{0,2,4,6}:2".
func lgipp(t *testing.T, d nvml.Device, info *nvml.GpuInstanceProfileInfo) string {
	t.Helper()
	pls, ret := d.GetGpuInstancePossiblePlacements(info)
	if ret != nvml.SUCCESS || len(pls) == 0 {
		t.Errorf("profile %d: placements: %v", info.Id, ret)
		return ""
	}
	starts := make([]string, len(pls))
	for i, p := range pls {
		if p.Size != pls[0].Size {
			t.Errorf("profile %d: placements of different sizes", info.Id)
		}
		starts[i] = strconv.Itoa(int(p.Start))
	}
	return fmt.Sprintf("{%s}:%d", strings.Join(starts, ","), pls[0].Size)
}
