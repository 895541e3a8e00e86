package nvmlfake

import (
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// model is one GPU model the fake can stand in for.
type model struct {
	// key is the catalog name used in profile files.
	key string
	// config is what the go-nvml mock server is built from. Name and PCI
	// device ID are the real ones (the mock's A100 is called "Mock NVIDIA
	// A100-SXM4-40GB"); memory is the mock's nominal size, which its MIG
	// profile sizes are consistent with.
	config gpus.Config
	// subsystemID is the PCI subsystem (board) ID.
	subsystemID uint32
	// sms and coresPerSM give GetNumGpuCores.
	sms, coresPerSM int
	// nvlinks is the number of NVLink links; 0 for a PCIe-only board.
	nvlinks int
	// mig is nil for GPUs without MIG.
	mig *migTable
	// migNeedsReset is true where a MIG mode change stays pending until
	// the GPU is reset (Ampere); Hopper and later apply it at once.
	migNeedsReset bool
}

// The catalog: the models a profile may use, by key.
var catalog = func() map[string]*model {
	models := []*model{
		{
			key:           "a100-sxm4-40gb",
			config:        withIdentity(gpus.A100_SXM4_40GB, "NVIDIA A100-SXM4-40GB", 0x20B010DE),
			subsystemID:   0x134F10DE,
			sms:           108,
			coresPerSM:    64,
			nvlinks:       12,
			mig:           newMIGTable(gpus.A100_SXM4_40GB.MIGProfiles.GpuInstanceProfiles),
			migNeedsReset: true,
		},
		{
			key:           "a100-sxm4-80gb",
			config:        withIdentity(gpus.A100_SXM4_80GB, "NVIDIA A100-SXM4-80GB", 0x20B210DE),
			subsystemID:   0x147F10DE,
			sms:           108,
			coresPerSM:    64,
			nvlinks:       12,
			mig:           newMIGTable(gpus.A100_SXM4_80GB.MIGProfiles.GpuInstanceProfiles),
			migNeedsReset: true,
		},
		{
			key:         "h100-sxm5-80gb",
			config:      withIdentity(gpus.H100_SXM5_80GB, "NVIDIA H100 80GB HBM3", 0x233010DE),
			subsystemID: 0x16C110DE,
			sms:         132,
			coresPerSM:  128,
			nvlinks:     18,
			mig:         newMIGTable(gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles),
		},
		{
			key:         "h200-sxm5-141gb",
			config:      withIdentity(gpus.H200_SXM5_141GB, "NVIDIA H200", 0x233510DE),
			subsystemID: 0x18BE10DE,
			sms:         132,
			coresPerSM:  128,
			nvlinks:     18,
			mig:         newMIGTable(gpus.H200_SXM5_141GB.MIGProfiles.GpuInstanceProfiles),
		},
		{
			key:         "b200-sxm-180gb",
			config:      withIdentity(gpus.B200_SXM5_180GB, "NVIDIA B200", 0x290110DE),
			subsystemID: 0x199910DE,
			sms:         148,
			coresPerSM:  128,
			nvlinks:     18,
			mig:         newMIGTable(gpus.B200_SXM5_180GB.MIGProfiles.GpuInstanceProfiles),
		},
		{
			// go-nvml has no mock for a non-MIG GPU; the L4 is the common
			// PCIe inference card (Ada Lovelace, no NVLink, no MIG).
			key: "l4",
			config: gpus.Config{
				Name:         "NVIDIA L4",
				Architecture: nvml.DEVICE_ARCH_ADA,
				Brand:        nvml.BRAND_NVIDIA,
				MemoryMB:     23034,
				CudaMajor:    8,
				CudaMinor:    9,
				PciDeviceId:  0x27B810DE,
			},
			subsystemID: 0x16CA10DE,
			sms:         58,
			coresPerSM:  128,
		},
	}
	m := map[string]*model{}
	for _, md := range models {
		m[md.key] = md
	}
	return m
}()

// withIdentity returns cfg with the real product name and PCI device ID.
func withIdentity(cfg gpus.Config, name string, pciDeviceID uint32) gpus.Config {
	cfg.Name = name
	cfg.PciDeviceId = pciDeviceID
	return cfg
}

// Models lists the model names a profile file may use.
func Models() []string {
	keys := make([]string, 0, len(catalog))
	for k := range catalog {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lookupModel finds a model by catalog key or by product name, ignoring
// case, so that a profile file may say "h100-sxm5-80gb" or
// "NVIDIA H100 80GB HBM3".
func lookupModel(name string) (*model, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if m, ok := catalog[n]; ok {
		return m, nil
	}
	for _, m := range catalog {
		if strings.ToLower(m.config.Name) == n {
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown GPU model %q (valid: %s)", name, strings.Join(Models(), ", "))
}
