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

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// loadState reconciles the state file with this boot and these GPUs: on a
// new boot every GPU has been reset; a GPU the file does not know gets
// its profile's initial MIG mode; and what the file says about known GPUs
// must be something the hardware could be in.
func (s *Server) loadState() error {
	boot := currentBootID()
	return s.store.mutate(func(st *state) error {
		if boot != "" && st.BootID != "" && st.BootID != boot {
			for _, gs := range st.GPUs {
				gs.reboot()
			}
		}
		if boot != "" {
			st.BootID = boot
		}
		for i, g := range s.gpus {
			gs, ok := st.GPUs[g.uuid]
			if !ok {
				mode := nvml.DEVICE_MIG_DISABLE
				if s.profile.gpus[i].migEnabled {
					mode = nvml.DEVICE_MIG_ENABLE
				}
				st.GPUs[g.uuid] = &gpuState{MigMode: mode, MigPendingMode: mode}
				continue
			}
			if err := g.validate(gs); err != nil {
				return fmt.Errorf("GPU %d (%s): %w", i, g.uuid, err)
			}
		}
		return nil
	})
}

// validate checks that recorded state fits the GPU's model: MIG only on a
// MIG-capable GPU, instances only with MIG on, known profiles, valid
// placements, no overlaps, unique IDs.
func (g *fakeGPU) validate(gs *gpuState) error {
	for _, m := range []int{gs.MigMode, gs.MigPendingMode} {
		if m != nvml.DEVICE_MIG_DISABLE && m != nvml.DEVICE_MIG_ENABLE {
			return fmt.Errorf("invalid MIG mode %d", m)
		}
	}
	if gs.ComputeMode < int(nvml.COMPUTEMODE_DEFAULT) || gs.ComputeMode >= int(nvml.COMPUTEMODE_COUNT) {
		return fmt.Errorf("invalid compute mode %d", gs.ComputeMode)
	}
	if gs.TimeSlice < 0 || gs.TimeSlice > maxTimeSliceLevel {
		return fmt.Errorf("invalid time-slice level %d", gs.TimeSlice)
	}
	if gs.ComputeMode != int(nvml.COMPUTEMODE_DEFAULT) && gs.MigMode == nvml.DEVICE_MIG_ENABLE {
		return fmt.Errorf("compute mode %d with MIG enabled", gs.ComputeMode)
	}
	if g.model.mig == nil {
		if gs.MigMode != nvml.DEVICE_MIG_DISABLE || gs.MigPendingMode != nvml.DEVICE_MIG_DISABLE || len(gs.GpuInstances) > 0 {
			return fmt.Errorf("model %s does not support MIG", g.model.key)
		}
		return nil
	}
	if len(gs.GpuInstances) > 0 && gs.MigMode != nvml.DEVICE_MIG_ENABLE {
		return fmt.Errorf("GPU instances with MIG disabled")
	}
	// Replaying the creations through the same checks as the NVML calls
	// catches every inconsistency at once.
	replay := &gpuState{MigMode: nvml.DEVICE_MIG_ENABLE}
	seen := map[uint32]bool{}
	for _, gi := range gs.GpuInstances {
		p, ok := g.model.mig.byID(gi.ProfileID)
		if !ok || !p.hasPlacement(gi.placement()) {
			return fmt.Errorf("GPU instance %d: profile %d has no placement %d+%d", gi.ID, gi.ProfileID, gi.Start, gi.Size)
		}
		if seen[gi.ID] {
			return fmt.Errorf("GPU instance ID %d used twice", gi.ID)
		}
		seen[gi.ID] = true
		pl := gi.placement()
		if _, ret := g.choosePlacement(replay, p, &pl); ret != nvml.SUCCESS {
			return fmt.Errorf("GPU instance %d does not fit beside the others: %w", gi.ID, ret)
		}
		ciReplay := &giState{}
		ciSeen := map[uint32]bool{}
		for _, ci := range gi.ComputeInstances {
			c, ok := p.computeByID(ci.ProfileID)
			if !ok || !c.hasPlacement(ci.placement()) || ciSeen[ci.ID] {
				return fmt.Errorf("GPU instance %d: invalid compute instance %d", gi.ID, ci.ID)
			}
			ciSeen[ci.ID] = true
			cpl := ci.placement()
			if _, ret := chooseCIPlacement(ciReplay, c, &cpl); ret != nvml.SUCCESS {
				return fmt.Errorf("GPU instance %d: compute instance %d does not fit: %w", gi.ID, ci.ID, ret)
			}
			ciReplay.ComputeInstances = append(ciReplay.ComputeInstances, ci)
		}
		replay.GpuInstances = append(replay.GpuInstances, gi)
	}
	return nil
}
