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
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// model is one GPU model the fake can stand in for. Every value is what
// NVML reports on the real GPU; the evidence for each, with its source, is
// in testdata/calibration/<key>.yaml, and TestCalibration compares the
// fake's NVML answers with it, so a value changed here without evidence
// (or evidence changed without the value) fails.
type model struct {
	// key is the catalog name used in profile files.
	key string
	// config is what the go-nvml mock server is built from: the real
	// product name, architecture, brand, compute capability, PCI device
	// ID and framebuffer size (nvidia-smi -q "FB Memory Usage / Total",
	// which is NVML's memory.total: 81559 MiB on an H100, not 81920).
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
	// fabric is what the GPU answers to nvmlDeviceGetGpuFabricInfo
	// (fabric.go); localFabricHealth the health summary of a localFabric
	// GPU.
	fabric            fabricSupport
	localFabricHealth uint8
	// defaultFabric and defaultPlatform are a multi-node fabric model's
	// readings where the profile file does not set them.
	defaultFabric   *fabricConfig
	defaultPlatform *platformConfig
	// moduleIDs are nvmlDeviceGetModuleId's answers by the GPU's index on
	// its board; nil answers ERROR_NOT_SUPPORTED.
	moduleIDs []int
}

// identity is a model's nvidia-smi -q identity.
func identity(name string, arch nvml.DeviceArchitecture, ccMajor, ccMinor int, memoryMiB uint64, pciDeviceID uint32) gpus.Config {
	return gpus.Config{
		Name:         name,
		Architecture: arch,
		Brand:        nvml.BRAND_NVIDIA,
		MemoryMB:     memoryMiB,
		CudaMajor:    ccMajor,
		CudaMinor:    ccMinor,
		PciDeviceId:  pciDeviceID,
	}
}

// The catalog: the models a profile may use, by key. The MIG tables are
// nvidia-smi mig -lgip transcribed: memory in MiB (the GiB column times
// 1024), SMs, and the DEC, ENC, CE, JPEG and OFA engine counts.
var catalog = func() map[string]*model {
	models := []*model{
		{
			key:           "a100-sxm4-40gb",
			config:        identity("NVIDIA A100-SXM4-40GB", nvml.DEVICE_ARCH_AMPERE, 8, 0, 40960, 0x20B010DE),
			subsystemID:   0x134F10DE,
			sms:           108,
			coresPerSM:    64,
			nvlinks:       12,
			migNeedsReset: true,
			mig: newMIGTable([]giSpec{
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE, memoryMiB: 4864, sms: 14, ce: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, memoryMiB: 4864, sms: 14, dec: 1, ce: 1, jpeg: 1, ofa: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, memoryMiB: 9856, sms: 14, dec: 1, ce: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_2_SLICE, memoryMiB: 9856, sms: 28, dec: 1, ce: 2},
				{index: nvml.GPU_INSTANCE_PROFILE_3_SLICE, memoryMiB: 19968, sms: 42, dec: 2, ce: 3},
				{index: nvml.GPU_INSTANCE_PROFILE_4_SLICE, memoryMiB: 19968, sms: 56, dec: 2, ce: 4},
				{index: nvml.GPU_INSTANCE_PROFILE_7_SLICE, memoryMiB: 40192, sms: 98, dec: 5, ce: 7, jpeg: 1, ofa: 1},
			}),
		},
		{
			key:           "a100-sxm4-80gb",
			config:        identity("NVIDIA A100-SXM4-80GB", nvml.DEVICE_ARCH_AMPERE, 8, 0, 81920, 0x20B210DE),
			subsystemID:   0x147F10DE,
			sms:           108,
			coresPerSM:    64,
			nvlinks:       12,
			migNeedsReset: true,
			mig: newMIGTable([]giSpec{
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE, memoryMiB: 9728, sms: 14, ce: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, memoryMiB: 9728, sms: 14, dec: 1, ce: 1, jpeg: 1, ofa: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, memoryMiB: 19968, sms: 14, dec: 1, ce: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_2_SLICE, memoryMiB: 19968, sms: 28, dec: 1, ce: 2},
				{index: nvml.GPU_INSTANCE_PROFILE_3_SLICE, memoryMiB: 40192, sms: 42, dec: 2, ce: 3},
				{index: nvml.GPU_INSTANCE_PROFILE_4_SLICE, memoryMiB: 40192, sms: 56, dec: 2, ce: 4},
				{index: nvml.GPU_INSTANCE_PROFILE_7_SLICE, memoryMiB: 80896, sms: 98, dec: 5, ce: 7, jpeg: 1, ofa: 1},
			}),
		},
		{
			key:         "h100-sxm5-80gb",
			config:      identity("NVIDIA H100 80GB HBM3", nvml.DEVICE_ARCH_HOPPER, 9, 0, 81559, 0x233010DE),
			subsystemID: 0x16C110DE,
			sms:         132,
			coresPerSM:  128,
			nvlinks:     18,
			fabric:      localFabric,
			mig: newMIGTable([]giSpec{
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE, memoryMiB: 9984, sms: 16, dec: 1, ce: 1, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, memoryMiB: 9984, sms: 16, dec: 1, ce: 1, jpeg: 1, ofa: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, memoryMiB: 20096, sms: 26, dec: 1, ce: 1, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_2_SLICE, memoryMiB: 20096, sms: 32, dec: 2, ce: 2, jpeg: 2},
				{index: nvml.GPU_INSTANCE_PROFILE_3_SLICE, memoryMiB: 40448, sms: 60, dec: 3, ce: 3, jpeg: 3},
				{index: nvml.GPU_INSTANCE_PROFILE_4_SLICE, memoryMiB: 40448, sms: 64, dec: 4, ce: 4, jpeg: 4},
				{index: nvml.GPU_INSTANCE_PROFILE_7_SLICE, memoryMiB: 81152, sms: 132, dec: 7, ce: 8, jpeg: 7, ofa: 1},
			}),
		},
		{
			key:         "h200-sxm5-141gb",
			config:      identity("NVIDIA H200", nvml.DEVICE_ARCH_HOPPER, 9, 0, 143771, 0x233510DE),
			subsystemID: 0x18BE10DE,
			sms:         132,
			coresPerSM:  128,
			nvlinks:     18,
			fabric:      localFabric,
			mig: newMIGTable([]giSpec{
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE, memoryMiB: 16384, sms: 16, dec: 1, ce: 1, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, memoryMiB: 16384, sms: 16, dec: 1, ce: 1, jpeg: 1, ofa: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, memoryMiB: 33024, sms: 26, dec: 1, ce: 1, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_2_SLICE, memoryMiB: 33024, sms: 32, dec: 2, ce: 2, jpeg: 2},
				{index: nvml.GPU_INSTANCE_PROFILE_3_SLICE, memoryMiB: 71168, sms: 60, dec: 3, ce: 3, jpeg: 3},
				{index: nvml.GPU_INSTANCE_PROFILE_4_SLICE, memoryMiB: 71168, sms: 64, dec: 4, ce: 4, jpeg: 4},
				{index: nvml.GPU_INSTANCE_PROFILE_7_SLICE, memoryMiB: 143104, sms: 132, dec: 7, ce: 8, jpeg: 7, ofa: 1},
			}),
		},
		{
			key:               "b200-sxm-180gb",
			config:            identity("NVIDIA B200", nvml.DEVICE_ARCH_BLACKWELL, 10, 0, 183359, 0x290110DE),
			subsystemID:       0x199910DE,
			sms:               148,
			coresPerSM:        128,
			nvlinks:           18,
			fabric:            localFabric,
			localFabricHealth: nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
			mig: newMIGTable([]giSpec{
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE, memoryMiB: 20992, sms: 18, dec: 1, ce: 2, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, memoryMiB: 20992, sms: 18, dec: 1, ce: 2, jpeg: 1, ofa: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, memoryMiB: 45312, sms: 30, dec: 1, ce: 2, jpeg: 1},
				{index: nvml.GPU_INSTANCE_PROFILE_2_SLICE, memoryMiB: 45312, sms: 36, dec: 2, ce: 4, jpeg: 2},
				{index: nvml.GPU_INSTANCE_PROFILE_3_SLICE, memoryMiB: 91136, sms: 70, dec: 3, ce: 6, jpeg: 3},
				{index: nvml.GPU_INSTANCE_PROFILE_4_SLICE, memoryMiB: 91136, sms: 72, dec: 4, ce: 8, jpeg: 4},
				{index: nvml.GPU_INSTANCE_PROFILE_7_SLICE, memoryMiB: 182784, sms: 148, dec: 7, ce: 16, jpeg: 7, ofa: 1},
			}),
		},
		{
			// One GPU of a GB200 NVL72 compute tray (two Grace CPUs, four
			// GPUs, 18 trays to a rack). Its fabric and platform readings
			// are the capture's (qx-gb200.xml), the module IDs by minor
			// number. No public nvidia-smi mig -lgip of a GB200 was
			// found, so the fake offers no MIG (testdata says so).
			key:         "gb200",
			config:      identity("NVIDIA GB200", nvml.DEVICE_ARCH_BLACKWELL, 10, 0, 189471, 0x294110DE),
			subsystemID: 0x204610DE,
			sms:         148,
			coresPerSM:  128,
			nvlinks:     18,
			fabric:      multiNodeFabric,
			defaultFabric: &fabricConfig{
				clusterUUID: [16]uint8{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
				cliqueID:    2,
				state:       nvml.GPU_FABRIC_STATE_COMPLETED,
				health:      nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
			},
			defaultPlatform: &platformConfig{chassisSerial: "1820000000001", slotNumber: 14, trayIndex: 4, hostID: 1},
			moduleIDs:       []int{2, 1, 4, 3},
		},
		{
			// The common PCIe inference card (Ada Lovelace, no NVLink,
			// no MIG).
			key:         "l4",
			config:      identity("NVIDIA L4", nvml.DEVICE_ARCH_ADA, 8, 9, 23034, 0x27B810DE),
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

// Models lists the model names a profile file may use.
func Models() []string {
	keys := make([]string, 0, len(catalog))
	for k := range catalog {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ModelOf returns the catalog key of the model with this key or product
// name (as lookupModel finds it), and whether the catalog has one: what
// gpu-check builds a per-model profile from.
func ModelOf(name string) (string, bool) {
	m, err := lookupModel(name)
	if err != nil {
		return "", false
	}
	return m.key, true
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
