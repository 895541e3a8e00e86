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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxGPUs bounds a profile: no server holds more, and the fake PCIe layout
// (see topology.go) has room for this many.
const maxGPUs = 16

// ProfileFile is the format of a --fake-profile file (YAML or JSON):
//
//	profile: dgx-h100                # a built-in profile, instead of the rest
//	driverVersion: "550.54.15"      # optional
//	cudaDriverVersion: "12.4"       # optional
//	gpus:
//	- model: h100-sxm5-80gb          # a name from Models() or a product name
//	  nvlinkIsland: 0                # GPUs with the same island are NVLink peers
//	  pci: {bus: 0x1b, root: 0x18, numaNode: 0}  # optional, on all GPUs or none:
//	                                 # PCI bus, root complex bus, NUMA node
//	- model: l4                      # no nvlinkIsland: no NVLink peers
//	  migEnabled: false              # MIG mode of a GPU the state does not know yet
//	fabric:                          # GB200/GB300 trays only, all optional:
//	  clusterUUID: 9f410827-0000-4000-8000-000000000001  # the NVLink domain
//	  cliqueID: 32766                # the NVLink partition in it
//	  state: COMPLETED               # NOT_STARTED, IN_PROGRESS, COMPLETED
//	  health: HEALTHY                # HEALTHY, UNHEALTHY, LIMITED_CAPACITY
//	platform: {chassisSerial: "1820000000001", slotNumber: 14, trayIndex: 4, hostID: 1}
type ProfileFile struct {
	// Profile names a built-in profile: the file then says which machine
	// the node is, as a file on a real node's disk would not need to. It
	// lets one DaemonSet run different fake machines on different nodes,
	// each reading the file in its node's fake state directory. It
	// excludes every other field.
	Profile           string    `json:"profile,omitempty"`
	DriverVersion     string    `json:"driverVersion,omitempty"`
	CUDADriverVersion string    `json:"cudaDriverVersion,omitempty"`
	GPUs              []GPUSpec `json:"gpus"`
	// Fabric and Platform set what the node's GPUs report of their
	// multi-node NVLink fabric and of their place in the rack (models of
	// an NVL72 rack only, such as gb200). With Profile they override the
	// built-in profile's: that is how each tray of a fake rack gets its
	// own tray index or clique.
	Fabric   *FabricSpec   `json:"fabric,omitempty"`
	Platform *PlatformSpec `json:"platform,omitempty"`
}

// GPUSpec is one GPU of a profile file.
type GPUSpec struct {
	Model        string `json:"model"`
	NVLinkIsland *int   `json:"nvlinkIsland,omitempty"`
	MigEnabled   bool   `json:"migEnabled,omitempty"`
	// PCI places the GPU in the host's PCIe tree; without it (on every GPU
	// of the profile) the GPUs are laid out two per root complex.
	PCI *PCIPlacement `json:"pci,omitempty"`
}

// PCIPlacement is where a GPU sits in the host's PCIe tree, as the sysfs
// of a real system shows it: its bus number, the bus number of its PCIe
// root complex (GPUs with the same root share a root complex, the
// standard pcieRoot attribute) and its NUMA node.
type PCIPlacement struct {
	Bus      int `json:"bus"`
	Root     int `json:"root"`
	NUMANode int `json:"numaNode"`
}

// profile is a resolved profile: models looked up, versions parsed.
type profile struct {
	driverVersion string
	// cudaVersion is NVML's integer form, 12040 for 12.4.
	cudaVersion int
	gpus        []gpuSlot
	// fabric and platform are the node's NVLink fabric and rack position;
	// nil unless its GPUs are of a multi-node fabric model.
	fabric   *fabricConfig
	platform *platformConfig
}

// gpuSlot is one GPU of a resolved profile.
type gpuSlot struct {
	model *model
	// island is the NVLink island, or noIsland.
	island     int
	migEnabled bool
	pcie       PCIeSlot
	bus        int
}

const noIsland = -1

const (
	defaultDriverVersion = "550.54.15"
	defaultCUDAVersion   = "12.4"
)

// onIsland returns a pointer to an island ID, for GPUSpec literals.
func onIsland(id int) *int { return &id }

// eight returns a profile file of eight GPUs of one model on one NVSwitch
// island, placed in the PCIe tree of a DGX system (pcie, one placement per
// GPU in index order).
func eight(modelKey, driver, cuda string, pcie []PCIPlacement) ProfileFile {
	p := ProfileFile{DriverVersion: driver, CUDADriverVersion: cuda}
	for i := range 8 {
		p.GPUs = append(p.GPUs, GPUSpec{Model: modelKey, NVLinkIsland: onIsland(0), PCI: &pcie[i]})
	}
	return p
}

// The PCIe trees of DGX systems, from public nvidia-smi and
// `nvidia-smi topo -m` outputs (testdata/calibration/profiles/ names the
// sources): bus numbers and NUMA nodes as the systems report them; which
// GPUs share a root complex as topo -m implies (GPUs of a DGX A100 pair up
// behind one PCIe switch; each GPU of a DGX H100/B200 has its own host
// bridge). The root bus numbers themselves are not in those outputs:
// each root is placed three buses above its first GPU.
var (
	// dgxA100PCIe: 8 NUMA nodes (AMD EPYC, NPS4), pairs per switch.
	dgxA100PCIe = []PCIPlacement{
		{0x07, 0x04, 3}, {0x0f, 0x04, 3}, {0x47, 0x44, 1}, {0x4e, 0x44, 1},
		{0x87, 0x84, 7}, {0x90, 0x84, 7}, {0xb7, 0xb4, 5}, {0xbd, 0xb4, 5},
	}
	// dgxHopperPCIe (DGX H100, H200 and B200): two NUMA nodes, one host
	// bridge per GPU.
	dgxHopperPCIe = []PCIPlacement{
		{0x1b, 0x18, 0}, {0x43, 0x40, 0}, {0x52, 0x4f, 0}, {0x61, 0x5e, 0},
		{0x9d, 0x9a, 1}, {0xc3, 0xc0, 1}, {0xd1, 0xce, 1}, {0xdf, 0xdc, 1},
	}
)

// gb200TrayPCIe: the bus numbers of the GB200 capture, two GPUs per Grace
// CPU (NUMA node), one root port per GPU.
var gb200TrayPCIe = []PCIPlacement{{0x29, 0x26, 0}, {0x3f, 0x3c, 0}, {0x9c, 0x99, 1}, {0xb2, 0xaf, 1}}

// builtinProfiles are the profiles selectable by name.
var builtinProfiles = map[string]ProfileFile{
	"dgx-a100": eight("a100-sxm4-40gb", defaultDriverVersion, defaultCUDAVersion, dgxA100PCIe),
	"dgx-h100": eight("h100-sxm5-80gb", defaultDriverVersion, defaultCUDAVersion, dgxHopperPCIe),
	"dgx-h200": eight("h200-sxm5-141gb", defaultDriverVersion, defaultCUDAVersion, dgxHopperPCIe),
	// One compute tray of a GB200 NVL72 rack: four GPUs on one NVLink
	// island, in the rack's fabric (the GB200 capture's domain and clique
	// unless the profile file's fabric: and platform: say otherwise).
	"gb200-tray": {
		DriverVersion:     "580.173.02",
		CUDADriverVersion: "13.0",
		GPUs: []GPUSpec{
			{Model: "gb200", NVLinkIsland: onIsland(0), PCI: &gb200TrayPCIe[0]},
			{Model: "gb200", NVLinkIsland: onIsland(0), PCI: &gb200TrayPCIe[1]},
			{Model: "gb200", NVLinkIsland: onIsland(0), PCI: &gb200TrayPCIe[2]},
			{Model: "gb200", NVLinkIsland: onIsland(0), PCI: &gb200TrayPCIe[3]},
		},
	},
	// Blackwell needs an R570 driver.
	"dgx-b200": eight("b200-sxm-180gb", "570.124.06", "12.8", dgxHopperPCIe),
	// Two NVLink islands of different models and a PCIe card without
	// NVLink or MIG: the shapes that matchAttribute on nvlinkGroup and
	// per-model selectors must get right.
	"mixed": {
		DriverVersion:     defaultDriverVersion,
		CUDADriverVersion: defaultCUDAVersion,
		GPUs: []GPUSpec{
			{Model: "h100-sxm5-80gb", NVLinkIsland: onIsland(0)},
			{Model: "h100-sxm5-80gb", NVLinkIsland: onIsland(0)},
			{Model: "h100-sxm5-80gb", NVLinkIsland: onIsland(0)},
			{Model: "h100-sxm5-80gb", NVLinkIsland: onIsland(0)},
			{Model: "a100-sxm4-40gb", NVLinkIsland: onIsland(1)},
			{Model: "a100-sxm4-40gb", NVLinkIsland: onIsland(1)},
			{Model: "a100-sxm4-40gb", NVLinkIsland: onIsland(1)},
			{Model: "a100-sxm4-40gb", NVLinkIsland: onIsland(1)},
			{Model: "l4"},
		},
	},
}

// Profiles lists the built-in profile names.
func Profiles() []string {
	names := make([]string, 0, len(builtinProfiles))
	for n := range builtinProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// loadProfile resolves a built-in profile name or the path of a profile
// file.
func loadProfile(nameOrPath string) (*profile, error) {
	if pf, ok := builtinProfiles[nameOrPath]; ok {
		return resolveProfile(pf)
	}
	data, err := os.ReadFile(nameOrPath)
	if errors.Is(err, fs.ErrNotExist) || nameOrPath == "" {
		return nil, fmt.Errorf("unknown profile %q: neither a built-in profile (%s) nor a profile file",
			nameOrPath, strings.Join(Profiles(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("read profile file: %w", err)
	}
	var pf ProfileFile
	if err := yaml.UnmarshalStrict(data, &pf); err != nil {
		return nil, fmt.Errorf("profile file %s: %w", nameOrPath, err)
	}
	if pf.Profile != "" {
		builtin, ok := builtinProfiles[pf.Profile]
		if !ok {
			return nil, fmt.Errorf("profile file %s: profile %q is not a built-in profile (%s)", nameOrPath, pf.Profile, strings.Join(Profiles(), ", "))
		}
		if pf.DriverVersion != "" || pf.CUDADriverVersion != "" || len(pf.GPUs) > 0 {
			return nil, fmt.Errorf("profile file %s: profile %q names a built-in profile; drop driverVersion, cudaDriverVersion and gpus, or drop profile (fabric and platform may stay)", nameOrPath, pf.Profile)
		}
		fabric, platform := pf.Fabric, pf.Platform
		pf = builtin
		if fabric != nil {
			pf.Fabric = fabric
		}
		if platform != nil {
			pf.Platform = platform
		}
	}
	p, err := resolveProfile(pf)
	if err != nil {
		return nil, fmt.Errorf("profile file %s: %w", nameOrPath, err)
	}
	return p, nil
}

// resolveProfile validates a profile file and looks up its models.
func resolveProfile(pf ProfileFile) (*profile, error) {
	if len(pf.GPUs) == 0 {
		return nil, errors.New("no GPUs")
	}
	if len(pf.GPUs) > maxGPUs {
		return nil, fmt.Errorf("%d GPUs, at most %d are supported", len(pf.GPUs), maxGPUs)
	}
	p := &profile{driverVersion: pf.DriverVersion}
	if p.driverVersion == "" {
		p.driverVersion = defaultDriverVersion
	}
	cuda := pf.CUDADriverVersion
	if cuda == "" {
		cuda = defaultCUDAVersion
	}
	v, err := parseCUDAVersion(cuda)
	if err != nil {
		return nil, err
	}
	p.cudaVersion = v
	for i, g := range pf.GPUs {
		m, err := lookupModel(g.Model)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		slot := gpuSlot{model: m, island: noIsland, migEnabled: g.MigEnabled}
		if g.NVLinkIsland != nil {
			if *g.NVLinkIsland < 0 {
				return nil, fmt.Errorf("GPU %d: nvlinkIsland must not be negative", i)
			}
			if m.nvlinks == 0 {
				return nil, fmt.Errorf("GPU %d: model %s has no NVLink, so it cannot be in an NVLink island", i, m.key)
			}
			slot.island = *g.NVLinkIsland
		}
		if g.MigEnabled && m.mig == nil {
			return nil, fmt.Errorf("GPU %d: model %s does not support MIG", i, m.key)
		}
		p.gpus = append(p.gpus, slot)
	}
	if err := placePCIe(p, pf); err != nil {
		return nil, err
	}
	if err := resolveFabric(p, pf); err != nil {
		return nil, err
	}
	return p, nil
}

// placePCIe lays the GPUs out in the PCIe tree: as the profile places
// them, or two per root complex.
func placePCIe(p *profile, pf ProfileFile) error {
	placed := 0
	for _, g := range pf.GPUs {
		if g.PCI != nil {
			placed++
		}
	}
	if placed == 0 {
		for i := range p.gpus {
			p.gpus[i].pcie = pcieSlot(i, len(p.gpus))
			p.gpus[i].bus = busNumber(i)
		}
		return nil
	}
	if placed != len(pf.GPUs) {
		return fmt.Errorf("%d of %d GPUs have a pci placement: place all or none", placed, len(pf.GPUs))
	}
	buses := map[int]bool{}
	perRoot := map[int]int{}
	for i, g := range pf.GPUs {
		pl := *g.PCI
		switch {
		case pl.Bus <= 0 || pl.Bus > 0xff || buses[pl.Bus]:
			return fmt.Errorf("GPU %d: pci bus %#x: want a bus number from 0x01 to 0xff that no other GPU has", i, pl.Bus)
		case pl.Root < 0 || pl.Root+2 >= pl.Bus:
			return fmt.Errorf("GPU %d: pci root %#x: want a bus number below the GPU's %#x by at least 3 (root port, switch)", i, pl.Root, pl.Bus)
		case pl.NUMANode < 0:
			return fmt.Errorf("GPU %d: numaNode must not be negative", i)
		case perRoot[pl.Root] >= 32:
			return fmt.Errorf("GPU %d: more than 32 GPUs under root %#x", i, pl.Root)
		}
		buses[pl.Bus] = true
		p.gpus[i].pcie = placedSlot(pl, perRoot[pl.Root])
		p.gpus[i].bus = pl.Bus
		perRoot[pl.Root]++
	}
	return nil
}

// parseCUDAVersion turns "12.4" into NVML's 12040.
func parseCUDAVersion(s string) (int, error) {
	major, minor, ok := strings.Cut(s, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || ma <= 0 || mi < 0 || mi > 99 {
		return 0, fmt.Errorf("cudaDriverVersion %q: want major.minor, e.g. 12.4", s)
	}
	return ma*1000 + mi*10, nil
}
