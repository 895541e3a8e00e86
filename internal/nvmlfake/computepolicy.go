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
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The settings GPU sharing changes on a whole GPU: the compute mode
// (nvmlDeviceSetComputeMode, "nvidia-smi -c"), which MPS needs set to
// EXCLUSIVE_PROCESS, and the time-slice level of the compute policy
// ("nvidia-smi compute-policy --set-timeslice", which NVML does not
// expose: real nodes run nvidia-smi, the fake offers SetTimeSlice).
//
// Both are driver state, not InfoROM settings: a GPU reset or a reboot
// returns them to the defaults (compute mode DEFAULT, time slice 0), and
// the fake keeps them, like MIG instances, in the state file until then.

// maxTimeSliceLevel is the longest time slice "nvidia-smi compute-policy
// --set-timeslice" takes: 0 default, 1 short, 2 medium, 3 long (the levels
// NVIDIA's DRA driver maps its Default/Short/Medium/Long to).
const maxTimeSliceLevel = 3

func (g *fakeGPU) installComputePolicy() {
	g.dev.GetComputeModeFunc = g.getComputeMode
	g.dev.SetComputeModeFunc = g.setComputeMode
}

func (g *fakeGPU) getComputeMode() (nvml.ComputeMode, nvml.Return) {
	var mode nvml.ComputeMode
	ret := g.view(func(gs *gpuState) { mode = nvml.ComputeMode(gs.ComputeMode) })
	return mode, ret
}

// setComputeMode is what the driver does: a mode outside the enum is
// ERROR_INVALID_ARGUMENT, and with MIG enabled only DEFAULT is accepted
// (nvidia-smi -c 3 on a MIG-enabled A100 says "Setting compute mode to
// EXCLUSIVE_PROCESS is not supported on a MIG-enabled device ... Not
// Supported", NVIDIA/go-nvml#61), which is ERROR_NOT_SUPPORTED.
func (g *fakeGPU) setComputeMode(mode nvml.ComputeMode) nvml.Return {
	if mode < nvml.COMPUTEMODE_DEFAULT || mode >= nvml.COMPUTEMODE_COUNT {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return g.update(func(gs *gpuState) nvml.Return {
		if gs.MigMode == nvml.DEVICE_MIG_ENABLE && mode != nvml.COMPUTEMODE_DEFAULT {
			return nvml.ERROR_NOT_SUPPORTED
		}
		gs.ComputeMode = int(mode)
		return nvml.SUCCESS
	})
}

// SetTimeSlice sets the GPU's time-slice level (0 to 3), as "nvidia-smi
// compute-policy -i <uuid> --set-timeslice <level>" does on a real node.
// An unknown GPU is ERROR_NOT_FOUND, a level out of range
// ERROR_INVALID_ARGUMENT; before Init it is ERROR_UNINITIALIZED like
// every call.
func (s *Server) SetTimeSlice(uuid string, level int) nvml.Return {
	g, ret := s.gpuForPolicy(uuid)
	if ret != nvml.SUCCESS {
		return ret
	}
	if level < 0 || level > maxTimeSliceLevel {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return g.update(func(gs *gpuState) nvml.Return {
		gs.TimeSlice = level
		return nvml.SUCCESS
	})
}

// TimeSlice returns the GPU's time-slice level: what tests check after a
// claim asked for an interval.
func (s *Server) TimeSlice(uuid string) (int, nvml.Return) {
	g, ret := s.gpuForPolicy(uuid)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	level := 0
	ret = g.view(func(gs *gpuState) { level = gs.TimeSlice })
	return level, ret
}

func (s *Server) gpuForPolicy(uuid string) (*fakeGPU, nvml.Return) {
	if !s.life.ready() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	for _, g := range s.gpus {
		if g.uuid == uuid {
			return g, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}
