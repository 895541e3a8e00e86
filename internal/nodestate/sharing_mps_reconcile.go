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
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// reconcile finishes what a plugin that died half-way left of MPS, and
// puts back what a reboot reset:
//
//   - A daemon that no claim references any more is stopped and undone
//     (its prepare was rolled back, or it was being stopped).
//   - A daemon the launcher runs that the checkpoint does not know is
//     stopped: nobody would ever stop it otherwise.
//   - A GPU whose compute mode gpudra changed and no MPS daemon needs any
//     more gets its mode back (its daemon's record was lost).
//   - After a reboot, which resets the compute mode, exclusive-process is
//     set again where a daemon of the whole GPU still runs.
func (m mpsStrategy) reconcile(ctx context.Context, s *State, rebooted bool) []error {
	logger := klog.FromContext(ctx)
	var errs []error

	daemons := s.MPSDaemons()
	for _, id := range slices.Sorted(maps.Keys(daemons)) {
		rec := daemons[id]
		err := func() error {
			unlock := s.gpuLocks.lock(rec.GPUUUID)
			defer unlock()
			if m.daemonRefs(s, id, "") == 0 {
				logger.Info("Stopping an MPS daemon no claim uses", "mpsDaemon", id, "state", rec.State)
				return m.stopDaemonLocked(ctx, s, "", id, rec.GPUUUID)
			}
			if p, ok := gpu.ParseDeviceName(id); rebooted && ok && !p.MIG {
				return s.opts.Hardware.SetComputeMode(rec.GPUUUID, gpu.ComputeModeExclusiveProcess)
			}
			return nil
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("MPS daemon %s: %w", id, err))
		}
	}

	if s.opts.MPS != nil {
		running, err := s.opts.MPS.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list MPS daemons: %w", err))
		}
		known := s.MPSDaemons()
		for _, id := range running {
			if _, ok := known[id]; ok {
				continue
			}
			d, err := m.daemonFor(s, id, "")
			if err == nil {
				logger.Info("Stopping an MPS daemon the checkpoint does not know", "mpsDaemon", id)
				err = s.opts.MPS.Stop(ctx, d)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("stop unknown MPS daemon %s: %w", id, err))
			}
		}
	}

	for uuid := range s.ComputeModes() {
		err := func() error {
			unlock := s.gpuLocks.lock(uuid)
			defer unlock()
			if m.computeModeNeeded(s, uuid) {
				return nil
			}
			logger.Info("Restoring the compute mode of a GPU no MPS daemon holds any more", "gpu", uuid)
			return m.restoreComputeModeLocked(ctx, s, "", uuid)
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("compute mode of GPU %s: %w", uuid, err))
		}
	}

	return errs
}

// computeModeNeeded reports whether an MPS daemon of the whole GPU is
// recorded, or a claim that is not being unprepared uses MPS on it.
func (m mpsStrategy) computeModeNeeded(s *State, uuid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, d := range s.cp.MPSDaemons {
		if p, ok := gpu.ParseDeviceName(id); ok && !p.MIG && d.GPUUUID == uuid {
			return true
		}
	}
	for _, c := range s.cp.Claims {
		if c.State == checkpoint.UnprepareStarted {
			continue
		}
		for _, d := range c.Devices {
			if d.GPUUUID == uuid && d.Mig == nil && d.Sharing != nil && d.Sharing.Strategy == checkpoint.SharingMPS {
				return true
			}
		}
	}
	return false
}
