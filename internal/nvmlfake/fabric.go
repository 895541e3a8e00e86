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
	"maps"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/uuid"
)

// Multi-node NVLink. A GPU in an NVLink switch fabric (a GB200/GB300 NVL72
// rack) reports through nvmlDeviceGetGpuFabricInfo (and its V and _v4
// forms) the fabric manager's probe of it: its state (NOT_STARTED,
// IN_PROGRESS, COMPLETED), the probe's status, the cluster UUID (the NVLink
// domain: a rack or rack pair) and the clique ID (the NVLink partition in
// it), and a health summary. nvmlDeviceGetPlatformInfo places it in the
// rack: chassis serial, slot, tray index, host ID, module ID.
//
// What a model answers, from public nvidia-smi -q captures
// (testdata/calibration/<model>.yaml, checked by TestCalibration):
//
//   - GB200: state Completed, status Success, a non-zero cluster UUID,
//     clique 2, health Healthy (NVIDIA/k8s-test-infra qx-gb200.xml); the
//     profile file sets these per node (fabric:), because each tray of a
//     rack has its own;
//   - H100, H200 and B200 (NVSwitch systems without a multi-node fabric):
//     state Completed, status Success, cluster UUID zero, clique 0, which
//     is how the driver says "not in a fabric cluster" (qx-h100.xml,
//     qx-b200.xml); health N/A on the H100, Healthy on the B200;
//   - A100 and the PCIe cards: fabric N/A, ERROR_NOT_SUPPORTED
//     (qx-a100.xml, qx-l40s.xml).
//
// nvmlDeviceGetGpuFabricInfoV cannot be faked through go-nvml: its
// GpuFabricInfoHandler keeps the real device handle in an unexported field
// and its V2 and V3 methods call libnvidia-ml directly, so no
// nvml.Interface implementation can answer them. The fake leaves that
// method at its zero value; discovery reads _v4 first, wherever the
// library has the symbol (LookupSymbol, which the fake answers for every
// symbol), and never reaches V on the fake. GetFabricInfo v1 and _v4 are
// answered.
//
// Transitions (a tray whose fabric manager has not finished, a clique
// changed by NMX, an unhealthy fabric) are injected with SetFabric, from
// any process, through the state directory as XIDs are: every Server over
// the directory answers the new values at its next call.

// fabricSupport is what a model answers to the fabric queries.
type fabricSupport int

const (
	// noFabric: ERROR_NOT_SUPPORTED (Ampere, PCIe cards).
	noFabric fabricSupport = iota
	// localFabric: an NVSwitch system outside any multi-node fabric:
	// Completed, zero cluster UUID, clique 0.
	localFabric
	// multiNodeFabric: a GPU of an NVLink switch fabric; the profile's
	// fabric: says which domain and clique.
	multiNodeFabric
)

// fabricConfig is what the fabric manager has told a GPU: the probe's
// state, the domain and clique, the health summary.
type fabricConfig struct {
	clusterUUID [nvml.GPU_FABRIC_UUID_LEN]uint8
	cliqueID    uint32
	state       uint8 // nvml.GPU_FABRIC_STATE_*
	health      uint8 // nvml.GPU_FABRIC_HEALTH_SUMMARY_*
}

// platformConfig is where the tray sits in its rack (nvmlPlatformInfo_v2).
type platformConfig struct {
	chassisSerial string
	slotNumber    uint8
	trayIndex     uint8
	hostID        uint8
}

// FabricSpec is a profile file's fabric: section: the NVLink fabric as this
// node's GPUs report it. Every field is optional; an absent one keeps the
// model's reading (the GB200 capture's).
type FabricSpec struct {
	// ClusterUUID is the NVLink domain, a UUID (e.g.
	// "9f410827-0000-4000-8000-000000000001"); all trays of one rack share
	// it.
	ClusterUUID string `json:"clusterUUID,omitempty"`
	// CliqueID is the NVLink partition within the domain (32766 is NMX's
	// default partition).
	CliqueID *uint32 `json:"cliqueID,omitempty"`
	// State is NOT_STARTED, IN_PROGRESS or COMPLETED.
	State string `json:"state,omitempty"`
	// Health is HEALTHY, UNHEALTHY or LIMITED_CAPACITY.
	Health string `json:"health,omitempty"`
}

// PlatformSpec is a profile file's platform: section: where this node's
// tray sits in its rack, as nvmlDeviceGetPlatformInfo reports it. Every
// field is optional; an absent one keeps the model's reading.
type PlatformSpec struct {
	// ChassisSerial is the rack's serial number, at most 15 characters
	// (13 on Blackwell).
	ChassisSerial string `json:"chassisSerial,omitempty"`
	SlotNumber    *uint8 `json:"slotNumber,omitempty"`
	TrayIndex     *uint8 `json:"trayIndex,omitempty"`
	HostID        *uint8 `json:"hostID,omitempty"`
}

var (
	fabricStates = map[string]uint8{
		"NOT_STARTED": nvml.GPU_FABRIC_STATE_NOT_STARTED,
		"IN_PROGRESS": nvml.GPU_FABRIC_STATE_IN_PROGRESS,
		"COMPLETED":   nvml.GPU_FABRIC_STATE_COMPLETED,
	}
	fabricHealths = map[string]uint8{
		"HEALTHY":          nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
		"UNHEALTHY":        nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY,
		"LIMITED_CAPACITY": nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY,
	}
)

func parseEnum(field, value string, valid map[string]uint8) (uint8, error) {
	if v, ok := valid[strings.ToUpper(value)]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("%s %q: want one of %s", field, value, strings.Join(slices.Sorted(maps.Keys(valid)), ", "))
}

// resolveFabric applies a profile's fabric: and platform: sections to the
// readings of its GPUs' model. Only GPUs of a multi-node fabric have them.
func resolveFabric(p *profile, pf ProfileFile) error {
	var mnnvl *model
	for i, g := range p.gpus {
		if g.model.fabric == multiNodeFabric {
			mnnvl = g.model
		} else if pf.Fabric != nil || pf.Platform != nil {
			return fmt.Errorf("GPU %d: model %s is in no multi-node NVLink fabric, so the profile cannot set fabric or platform; drop them or use a model such as gb200", i, g.model.key)
		}
	}
	if mnnvl == nil {
		return nil
	}
	f, pl := *mnnvl.defaultFabric, *mnnvl.defaultPlatform
	if s := pf.Fabric; s != nil {
		if s.ClusterUUID != "" {
			u, err := uuid.Parse(s.ClusterUUID)
			if err != nil {
				return fmt.Errorf("fabric.clusterUUID %q: want a UUID such as 9f410827-0000-4000-8000-000000000001: %w", s.ClusterUUID, err)
			}
			f.clusterUUID = u
		}
		if s.CliqueID != nil {
			f.cliqueID = *s.CliqueID
		}
		if s.State != "" {
			v, err := parseEnum("fabric.state", s.State, fabricStates)
			if err != nil {
				return err
			}
			f.state = v
		}
		if s.Health != "" {
			v, err := parseEnum("fabric.health", s.Health, fabricHealths)
			if err != nil {
				return err
			}
			f.health = v
		}
	}
	if s := pf.Platform; s != nil {
		if s.ChassisSerial != "" {
			if len(s.ChassisSerial) > 15 {
				return fmt.Errorf("platform.chassisSerial %q: at most 15 characters (NVML's field holds 16 bytes with the NUL)", s.ChassisSerial)
			}
			pl.chassisSerial = s.ChassisSerial
		}
		if s.SlotNumber != nil {
			pl.slotNumber = *s.SlotNumber
		}
		if s.TrayIndex != nil {
			pl.trayIndex = *s.TrayIndex
		}
		if s.HostID != nil {
			pl.hostID = *s.HostID
		}
	}
	p.fabric, p.platform = &f, &pl
	return nil
}

// fabricOverride is an injected change of a GPU's fabric reading, kept in
// the state file; a nil field keeps the profile's value.
type fabricOverride struct {
	State    *uint8  `json:"state,omitempty"`
	Health   *uint8  `json:"health,omitempty"`
	CliqueID *uint32 `json:"cliqueID,omitempty"`
}

// FabricChange is a transition of a GPU's fabric, as the fabric manager
// (or NMX, for the clique) drives it. Empty fields are left as they are.
type FabricChange struct {
	// State is NOT_STARTED, IN_PROGRESS or COMPLETED.
	State string
	// Health is HEALTHY, UNHEALTHY or LIMITED_CAPACITY.
	Health string
	// CliqueID moves the GPU to another NVLink partition.
	CliqueID *uint32
}

func (c FabricChange) apply(o *fabricOverride) error {
	if c.State != "" {
		v, err := parseEnum("fabric state", c.State, fabricStates)
		if err != nil {
			return err
		}
		o.State = &v
	}
	if c.Health != "" {
		v, err := parseEnum("fabric health", c.Health, fabricHealths)
		if err != nil {
			return err
		}
		o.Health = &v
	}
	if c.CliqueID != nil {
		id := *c.CliqueID
		o.CliqueID = &id
	}
	return nil
}

// SetFabric changes the fabric reading of the GPU with the given UUID in
// stateDir, or of every GPU there when uuid is "" (a tray's GPUs move
// together when its fabric manager restarts or NMX repartitions). Every
// Server over stateDir answers the new reading from its next call. A GPU
// whose model has no fabric keeps answering ERROR_NOT_SUPPORTED.
func SetFabric(stateDir, uuid string, c FabricChange) error {
	if stateDir == "" {
		return errors.New("set fabric: no state directory")
	}
	return mutateStateDir(stateDir, func(st *state) error { return setFabric(st, uuid, c) })
}

// SetFabric does what the package-level SetFabric does, for this Server's
// state (in memory or in its state directory).
func (s *Server) SetFabric(uuid string, c FabricChange) error {
	if err := s.store.mutate(func(st *state) error { return setFabric(st, uuid, c) }); err != nil {
		return fmt.Errorf("nvmlfake: %w", err)
	}
	return nil
}

func setFabric(st *state, uuid string, c FabricChange) error {
	if uuid != "" {
		gs, ok := st.GPUs[uuid]
		if !ok {
			return fmt.Errorf("set fabric: no GPU %s", uuid)
		}
		if gs.Fabric == nil {
			gs.Fabric = &fabricOverride{}
		}
		return c.apply(gs.Fabric)
	}
	if len(st.GPUs) == 0 {
		return errors.New("set fabric: the state directory has no GPUs yet (start a Server over it first)")
	}
	for _, gs := range st.GPUs {
		if gs.Fabric == nil {
			gs.Fabric = &fabricOverride{}
		}
		if err := c.apply(gs.Fabric); err != nil {
			return err
		}
	}
	return nil
}

// fabricReading is the GPU's current fabric: the profile's (or the
// model's), with any injected change applied; ERROR_NOT_SUPPORTED for a
// GPU without a fabric.
func (g *fakeGPU) fabricReading() (f fabricConfig, ret nvml.Return) {
	switch g.model.fabric {
	case noFabric:
		return f, nvml.ERROR_NOT_SUPPORTED
	case localFabric:
		f = fabricConfig{state: nvml.GPU_FABRIC_STATE_COMPLETED, health: g.model.localFabricHealth}
	case multiNodeFabric:
		f = *g.s.profile.fabric
	}
	ret = g.view(func(gs *gpuState) {
		if o := gs.Fabric; o != nil {
			if o.State != nil {
				f.state = *o.State
			}
			if o.Health != nil {
				f.health = *o.Health
			}
			if o.CliqueID != nil {
				f.cliqueID = *o.CliqueID
			}
		}
	})
	return f, ret
}

// installFabric answers the fabric and platform queries.
func (g *fakeGPU) installFabric() {
	d := g.dev
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		f, ret := g.fabricReading()
		if ret != nvml.SUCCESS {
			return nvml.GpuFabricInfo{}, ret
		}
		return nvml.GpuFabricInfo{
			ClusterUuid: f.clusterUUID,
			Status:      uint32(nvml.SUCCESS),
			CliqueId:    f.cliqueID,
			State:       f.state,
		}, nvml.SUCCESS
	}
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		f, ret := g.fabricReading()
		if ret != nvml.SUCCESS {
			return nvml.GpuFabricInfo_v4{}, ret
		}
		info := nvml.GpuFabricInfo_v4{
			ClusterUuid:   f.clusterUUID,
			Status:        uint32(nvml.SUCCESS),
			NumCliques:    1,
			State:         f.state,
			HealthSummary: f.health,
		}
		// nvml.h: "The legacy v3 cliqueId maps to the id of the first
		// NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER entry".
		info.Cliques[0] = nvml.GpuFabricClique_v1{Type: nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, Id: f.cliqueID}
		return info, nvml.SUCCESS
	}
	d.GetPlatformInfoFunc = func() (nvml.PlatformInfo, nvml.Return) {
		pl := g.s.profile.platform
		if pl == nil || g.model.fabric != multiNodeFabric {
			return nvml.PlatformInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		info := nvml.PlatformInfo{
			Version:    nvml.STRUCT_VERSION(nvml.PlatformInfo{}, 2),
			SlotNumber: pl.slotNumber,
			TrayIndex:  pl.trayIndex,
			HostId:     pl.hostID,
			ModuleId:   uint8(g.moduleID()),
			// PeerType: the capture prints "Switch Connected" but not
			// the number behind it, so the fake leaves it 0.
		}
		copy(info.ChassisSerialNumber[:len(info.ChassisSerialNumber)-1], pl.chassisSerial)
		return info, nvml.SUCCESS
	}
	d.GetModuleIdFunc = func() (int, nvml.Return) {
		if len(g.model.moduleIDs) == 0 {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return g.moduleID(), nvml.SUCCESS
	}
}

// moduleID is the GPU's module on its board: the model's module IDs by
// index on the board, a board per len(moduleIDs) GPUs.
func (g *fakeGPU) moduleID() int {
	ids := g.model.moduleIDs
	if len(ids) == 0 {
		return 0
	}
	return ids[g.index%len(ids)]
}
