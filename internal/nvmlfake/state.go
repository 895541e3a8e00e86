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
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// stateVersion is bumped when the state file format changes incompatibly.
const stateVersion = 1

// state is what real GPUs remember: MIG mode (kept across reboots, like
// the InfoROM) and MIG instances (lost on reboot and GPU reset).
type state struct {
	Version int `json:"version"`
	// BootID is the boot the instances were created in; on a different
	// boot they are gone and pending MIG modes have taken effect.
	BootID string `json:"bootID,omitempty"`
	// GPUs by UUID.
	GPUs map[string]*gpuState `json:"gpus"`
}

// gpuState is one GPU's MIG state.
type gpuState struct {
	// MigMode is the current mode, MigPendingMode the one after the next
	// reset (nvml.DEVICE_MIG_DISABLE or nvml.DEVICE_MIG_ENABLE).
	MigMode        int       `json:"migMode"`
	MigPendingMode int       `json:"migPendingMode"`
	GpuInstances   []giState `json:"gpuInstances,omitempty"`
	// Lost is set once the GPU has fallen off the bus (see LoseGPU): every
	// NVML call on it fails with ERROR_GPU_IS_LOST until the node reboots.
	Lost bool `json:"lost,omitempty"`
	// ComputeMode is the nvml.ComputeMode, TimeSlice the compute policy's
	// time-slice level (0-3); see computepolicy.go. Zero is the default.
	ComputeMode int `json:"computeMode,omitempty"`
	TimeSlice   int `json:"timeSlice,omitempty"`
	// RecoveryAction is what the driver asks for after an XID
	// (nvml.DeviceGpuRecoveryAction; recovery.go); a reset clears it.
	RecoveryAction int `json:"recoveryAction,omitempty"`
	// Fabric is an injected change of the GPU's NVLink fabric reading
	// (SetFabric, fabric.go); nil answers the profile's. Neither a reset
	// nor a reboot clears it: it stands for the fabric manager's view of
	// the GPU, which lives outside the node.
	Fabric *fabricOverride `json:"fabric,omitempty"`
}

// giState is one GPU instance.
type giState struct {
	ID        uint32 `json:"id"`
	ProfileID uint32 `json:"profileID"`
	// Start and Size are the placement, in memory slices.
	Start            uint32    `json:"start"`
	Size             uint32    `json:"size"`
	ComputeInstances []ciState `json:"computeInstances,omitempty"`
}

// ciState is one compute instance.
type ciState struct {
	ID        uint32 `json:"id"`
	ProfileID uint32 `json:"profileID"`
	// Start and Size are the placement, in compute slices of the GPU
	// instance.
	Start uint32 `json:"start"`
	Size  uint32 `json:"size"`
}

func (g giState) placement() nvml.GpuInstancePlacement {
	return nvml.GpuInstancePlacement{Start: g.Start, Size: g.Size}
}

func (c ciState) placement() nvml.ComputeInstancePlacement {
	return nvml.ComputeInstancePlacement{Start: c.Start, Size: c.Size}
}

// clone returns a deep copy, so that a failed mutation leaves no trace.
func (s *state) clone() *state {
	out := &state{Version: s.Version, BootID: s.BootID, GPUs: make(map[string]*gpuState, len(s.GPUs))}
	for uuid, g := range s.GPUs {
		gc := *g
		if g.Fabric != nil {
			f := *g.Fabric
			gc.Fabric = &f
		}
		gc.GpuInstances = make([]giState, len(g.GpuInstances))
		for i, gi := range g.GpuInstances {
			gi.ComputeInstances = slices.Clone(gi.ComputeInstances)
			gc.GpuInstances[i] = gi
		}
		out.GPUs[uuid] = &gc
	}
	return out
}

// resetGPU is what a GPU reset does: the pending MIG mode takes effect,
// every MIG instance is gone, and the compute mode and time slice are back
// to their defaults.
func (g *gpuState) resetGPU() {
	g.MigMode = g.MigPendingMode
	g.GpuInstances = nil
	g.ComputeMode, g.TimeSlice = 0, 0
	g.RecoveryAction = 0
}

// reboot is what a node reboot does to the GPU: a reset, and a GPU that
// had fallen off the bus is enumerated again.
func (g *gpuState) reboot() {
	g.resetGPU()
	g.Lost = false
}

// gi returns the GPU instance with the given ID.
func (g *gpuState) gi(id uint32) (*giState, bool) {
	for i := range g.GpuInstances {
		if g.GpuInstances[i].ID == id {
			return &g.GpuInstances[i], true
		}
	}
	return nil, false
}

// ci returns the compute instance with the given ID.
func (g *giState) ci(id uint32) (*ciState, bool) {
	for i := range g.ComputeInstances {
		if g.ComputeInstances[i].ID == id {
			return &g.ComputeInstances[i], true
		}
	}
	return nil, false
}

// lowestFreeID returns the lowest ID that used does not contain, the way
// the driver hands out GPU and compute instance IDs.
func lowestFreeID(used []uint32) uint32 {
	for id := uint32(0); ; id++ {
		if !slices.Contains(used, id) {
			return id
		}
	}
}
