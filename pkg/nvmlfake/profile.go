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
//	driverVersion: "550.54.15"      # optional
//	cudaDriverVersion: "12.4"       # optional
//	gpus:
//	- model: h100-sxm5-80gb          # a name from Models() or a product name
//	  nvlinkIsland: 0                # GPUs with the same island are NVLink peers
//	- model: l4                      # no nvlinkIsland: no NVLink peers
//	  migEnabled: false              # MIG mode of a GPU the state does not know yet
type ProfileFile struct {
	DriverVersion     string    `json:"driverVersion,omitempty"`
	CUDADriverVersion string    `json:"cudaDriverVersion,omitempty"`
	GPUs              []GPUSpec `json:"gpus"`
}

// GPUSpec is one GPU of a profile file.
type GPUSpec struct {
	Model        string `json:"model"`
	NVLinkIsland *int   `json:"nvlinkIsland,omitempty"`
	MigEnabled   bool   `json:"migEnabled,omitempty"`
}

// profile is a resolved profile: models looked up, versions parsed.
type profile struct {
	driverVersion string
	// cudaVersion is NVML's integer form, 12040 for 12.4.
	cudaVersion int
	gpus        []gpuSlot
}

// gpuSlot is one GPU of a resolved profile.
type gpuSlot struct {
	model *model
	// island is the NVLink island, or noIsland.
	island     int
	migEnabled bool
}

const noIsland = -1

const (
	defaultDriverVersion = "550.54.15"
	defaultCUDAVersion   = "12.4"
)

// onIsland returns a pointer to an island ID, for GPUSpec literals.
func onIsland(id int) *int { return &id }

// eight returns a profile file of eight GPUs of one model on one NVSwitch
// island, like a DGX/HGX board.
func eight(modelKey, driver, cuda string) ProfileFile {
	p := ProfileFile{DriverVersion: driver, CUDADriverVersion: cuda}
	for range 8 {
		p.GPUs = append(p.GPUs, GPUSpec{Model: modelKey, NVLinkIsland: onIsland(0)})
	}
	return p
}

// builtinProfiles are the profiles selectable by name.
var builtinProfiles = map[string]ProfileFile{
	"dgx-a100": eight("a100-sxm4-40gb", defaultDriverVersion, defaultCUDAVersion),
	"dgx-h100": eight("h100-sxm5-80gb", defaultDriverVersion, defaultCUDAVersion),
	"dgx-h200": eight("h200-sxm5-141gb", defaultDriverVersion, defaultCUDAVersion),
	// Blackwell needs an R570 driver.
	"dgx-b200": eight("b200-sxm-180gb", "570.124.06", "12.8"),
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
	return p, nil
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
