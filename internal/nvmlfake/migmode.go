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

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// view calls fn with the GPU's current state. A GPU the state file does
// not know (another process replaced the file) has MIG off and no
// instances, like a GPU fresh from the factory.
func (g *fakeGPU) view(fn func(gs *gpuState)) nvml.Return {
	err := g.s.store.view(func(s *state) {
		gs, ok := s.GPUs[g.uuid]
		if !ok {
			gs = &gpuState{}
		}
		fn(gs)
	})
	if err != nil {
		logStoreError(g.s.opts.Logger, err)
		return nvml.ERROR_UNKNOWN
	}
	return nvml.SUCCESS
}

// update applies fn to the GPU's state and persists it on SUCCESS.
func (g *fakeGPU) update(fn func(gs *gpuState) nvml.Return) nvml.Return {
	return g.s.store.update(func(s *state) nvml.Return {
		gs, ok := s.GPUs[g.uuid]
		if !ok {
			gs = &gpuState{}
			s.GPUs[g.uuid] = gs
		}
		return fn(gs)
	})
}

// migEnabled reports the current MIG mode.
func (g *fakeGPU) migEnabled() bool {
	on := false
	g.view(func(gs *gpuState) { on = gs.MigMode == nvml.DEVICE_MIG_ENABLE })
	return on
}

func (g *fakeGPU) installMigMode() {
	g.dev.GetMigModeFunc = g.getMigMode
	g.dev.SetMigModeFunc = g.setMigMode
}

func (g *fakeGPU) getMigMode() (current, pending int, ret nvml.Return) {
	if g.model.mig == nil {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	ret = g.view(func(gs *gpuState) { current, pending = gs.MigMode, gs.MigPendingMode })
	return current, pending, ret
}

// setMigMode returns (activationStatus, ret) in go-nvml's order. Hopper
// and later switch at once. Ampere records the new mode as pending and
// reports ERROR_RESET_REQUIRED until the GPU is reset (ResetGPU) or the
// node reboots. Disabling MIG while GPU instances exist is ERROR_IN_USE.
func (g *fakeGPU) setMigMode(mode int) (activation, ret nvml.Return) {
	if g.model.mig == nil {
		return nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED
	}
	if mode != nvml.DEVICE_MIG_DISABLE && mode != nvml.DEVICE_MIG_ENABLE {
		return nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT
	}
	activation = nvml.SUCCESS
	ret = g.update(func(gs *gpuState) nvml.Return {
		if mode == nvml.DEVICE_MIG_DISABLE && len(gs.GpuInstances) > 0 {
			return nvml.ERROR_IN_USE
		}
		gs.MigPendingMode = mode
		if g.model.migNeedsReset && mode != gs.MigMode {
			activation = nvml.ERROR_RESET_REQUIRED
			return nvml.SUCCESS
		}
		gs.MigMode = mode
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return ret, ret
	}
	return activation, ret
}
