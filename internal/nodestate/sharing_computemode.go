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

package nodestate

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// The compute mode a GPU had before gpudra set it to exclusive-process for
// MPS (Checkpoint.ComputeModes). It is recorded before the first change
// and forgotten only after it is restored, so it is known for certain in
// every order of failures and retries: a daemon whose stop failed half-way,
// a new daemon started before the kubelet retried, a daemon record lost,
// left Stopping or without its mode. Only when no record of it survives at
// all (a hand-edited checkpoint) while gpudra's MPS holds the GPU does the
// mode to restore become Default, the mode every GPU boots in: never
// gpudra's own exclusive-process.

// rememberComputeModeLocked returns the compute mode to restore on the
// GPU, recording it first if gpudra has not changed the mode yet. The
// caller holds the GPU lock.
func (m mpsStrategy) rememberComputeModeLocked(ctx context.Context, s *State, uuid string) (int, error) {
	s.mu.Lock()
	mode, ok := s.cp.ComputeModes[uuid]
	s.mu.Unlock()
	if ok {
		return mode, nil
	}
	cur, err := s.opts.Hardware.ComputeMode(uuid)
	if err != nil {
		return 0, err
	}
	mode = int(cur)
	if cur == gpu.ComputeModeExclusiveProcess && m.mpsHoldsGPU(ctx, s, uuid) {
		klog.FromContext(ctx).Info("GPU is in exclusive-process compute mode under gpudra's MPS and no record says what it was before; it will be put back to Default, the mode it boots in",
			"gpu", uuid)
		mode = int(gpu.ComputeModeDefault)
	}
	if err := m.putComputeMode(s, uuid, &mode); err != nil {
		return 0, err
	}
	return mode, nil
}

// mpsHoldsGPU reports whether gpudra runs, or recorded, an MPS daemon of
// the whole GPU: then its exclusive-process mode is gpudra's doing.
func (m mpsStrategy) mpsHoldsGPU(ctx context.Context, s *State, uuid string) bool {
	s.mu.Lock()
	for _, d := range s.cp.MPSDaemons {
		if d.GPUUUID == uuid {
			s.mu.Unlock()
			return true
		}
	}
	s.mu.Unlock()
	g, ok := s.opts.Node.GPUByUUID(uuid)
	if !ok || s.opts.MPS == nil {
		return false
	}
	running, err := s.opts.MPS.List(ctx)
	if err != nil {
		// Cannot tell: the safe answer, which never restores
		// exclusive-process.
		return true
	}
	for _, id := range running {
		if id == g.DeviceName() {
			return true
		}
	}
	return false
}

// restoreComputeModeLocked puts the GPU back in the compute mode it had
// before gpudra changed it, and then forgets that mode; a GPU gpudra never
// changed is left alone. A recorded mode that is no compute mode (a
// corrupted checkpoint) restores Default. A GPU that is no longer on the
// node, or has fallen off the bus, cannot be set and needs nothing: the
// reset or reboot that brings it back resets its mode. The caller holds
// the GPU lock.
func (m mpsStrategy) restoreComputeModeLocked(ctx context.Context, s *State, claimUID, uuid string) error {
	s.mu.Lock()
	recorded, ok := s.cp.ComputeModes[uuid]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("gpu", uuid)
	mode := gpu.ComputeMode(recorded)
	if !validComputeMode(mode) {
		logger.Error(nil, "The compute mode recorded to restore is not one; restoring Default", "recorded", recorded)
		mode = gpu.ComputeModeDefault
	}
	if _, present := s.opts.Node.GPUByUUID(uuid); present {
		err := s.opts.Hardware.SetComputeMode(uuid, mode)
		switch {
		case errors.Is(err, gpu.ErrGPUGone):
			logger.Info("The GPU has fallen off the bus; its compute mode comes back with it", "err", err)
		case err != nil:
			return fmt.Errorf("restore the compute mode %s: %w", mode, err)
		default:
			logger.V(2).Info("Restored the GPU's compute mode", "computeMode", mode)
		}
		if err := s.step(claimUID, StepComputeModeRestored); err != nil {
			return err
		}
	} else {
		logger.Info("The GPU whose compute mode gpudra changed is no longer on this node; forgetting the mode")
	}
	return m.putComputeMode(s, uuid, nil)
}

func validComputeMode(m gpu.ComputeMode) bool {
	switch m {
	case gpu.ComputeModeDefault, gpu.ComputeModeExclusiveThread, gpu.ComputeModeProhibited, gpu.ComputeModeExclusiveProcess:
		return true
	}
	return false
}

// putComputeMode records (or, with mode nil, forgets) the mode to restore
// on a GPU and waits until the checkpoint holds it; a failed write takes
// the change back out. The caller holds the GPU's lock.
func (m mpsStrategy) putComputeMode(s *State, uuid string, mode *int) error {
	s.mu.Lock()
	gen := putEntryLocked(s, &s.cp.ComputeModes, uuid, mode)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		return fmt.Errorf("record the compute mode of GPU %s: %w", uuid, err)
	}
	return nil
}

// ComputeModes returns the compute modes gpudra will restore, by GPU UUID.
func (s *State) ComputeModes() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.cp.ComputeModes))
	for k, v := range s.cp.ComputeModes {
		out[k] = v
	}
	return out
}

// migrateComputeModes takes the modes to restore of a checkpoint written
// before Checkpoint.ComputeModes from its daemon records.
func migrateComputeModes(cp *checkpoint.Checkpoint) {
	for _, d := range cp.MPSDaemons {
		if d.PreviousComputeMode == nil || d.GPUUUID == "" {
			continue
		}
		if _, ok := cp.ComputeModes[d.GPUUUID]; !ok {
			if cp.ComputeModes == nil {
				cp.ComputeModes = map[string]int{}
			}
			cp.ComputeModes[d.GPUUUID] = *d.PreviousComputeMode
		}
	}
}
