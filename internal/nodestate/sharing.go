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

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// Sharing: how the containers of several claims (or of one claim) share a
// device. Each strategy of the config API (configapi.SharingStrategy) has
// one implementation of sharingStrategy below, listed in sharingStrategies;
// the functions in this file are the only ones that look at a device's
// recorded strategy and pick the implementation. Everything a strategy
// changes on the node is recorded in the checkpoint before it is changed
// (sharing_mps.go, sharing_timeslice.go), so the implementations keep no
// state of their own: they are handed the State whose checkpoint they
// read and change.
//
// To add a strategy, follow "Add a sharing strategy" in
// docs/development.md; TestEveryStrategyIsComplete fails until every part
// of it is done.

// sharingStrategy is what one sharing strategy does on the node, for one
// device of a claim whose record names the strategy
// (checkpoint.DeviceSharing.Strategy).
type sharingStrategy interface {
	// name is the strategy as the checkpoint records it (a
	// checkpoint.Sharing* constant), which is also its config API value.
	name() string
	// clientEnv is the environment the device's containers get for it,
	// recorded with the claim at prepare.
	clientEnv(sh *checkpoint.DeviceSharing) []string
	// containerEdits are the mounts the device's containers get for it,
	// when the claim's CDI spec is written.
	containerEdits(s *State, d checkpoint.Device) (gpu.Edits, error)
	// prepareLocked sets the sharing up for claimUID, or makes sure it
	// still is (a prepared claim after a restart). The caller holds the
	// device's GPU lock.
	prepareLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error
	// keptByOthers reports, without the GPU lock, whether claims other
	// than claimUID keep what the device shares, so that release has
	// nothing to do and need not wait for the lock.
	keptByOthers(s *State, claimUID string, d checkpoint.Device) bool
	// releaseLocked undoes what the sharing changed once no claim but
	// claimUID needs it. The caller holds the device's GPU lock.
	releaseLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error
	// reconcile runs at start-up, once every claim was reconciled: it
	// finishes or undoes what a plugin that died half-way left, and, after
	// a reboot, sets again what the reboot reset where claims still need
	// it.
	reconcile(ctx context.Context, s *State, rebooted bool) []error
}

// sharingStrategies are the strategies gpudra implements, in the order
// start-up reconciles them.
var sharingStrategies = []sharingStrategy{mpsStrategy{}, timeSlicingStrategy{}}

// strategyOf returns the implementation of the strategy the device's
// sharing records; false for a device that is not shared or a strategy
// this gpudra does not know.
func strategyOf(sh *checkpoint.DeviceSharing) (sharingStrategy, bool) {
	if sh == nil {
		return nil, false
	}
	for _, st := range sharingStrategies {
		if st.name() == sh.Strategy {
			return st, true
		}
	}
	return nil, false
}

// SharingSteps lists every step of setting up and tearing down sharing, in
// the order they happen: tests crash the plugin at each.
var SharingSteps = []string{
	StepDaemonRecorded, StepComputeModeSet, StepDaemonLaunched, StepDaemonReady,
	StepDaemonStopping, StepDaemonStopped, StepComputeModeRestored,
	StepTimeSliceRecorded, StepTimeSliceSet, StepTimeSliceRestored,
}

// step runs the test hook after a step; its error is a crash.
func (s *State) step(claimUID, name string) error {
	if h := s.opts.Hooks.AfterSharingStep; h != nil {
		return crash(h(claimUID, name))
	}
	return nil
}

// prepareSharing sets up device i's sharing, once its MIG device (if any)
// exists. The caller holds the claim lock.
func (s *State) prepareSharing(ctx context.Context, rec *checkpoint.Claim, i int) error {
	d := rec.Devices[i]
	if d.Sharing == nil {
		return nil
	}
	unlock := s.gpuLocks.lock(d.GPUUUID)
	defer unlock()
	st, ok := strategyOf(d.Sharing)
	if !ok {
		return fmt.Errorf("unknown sharing strategy %q", d.Sharing.Strategy)
	}
	return st.prepareLocked(ctx, s, rec.UID, d)
}

// releaseSharing tears down what the claim's devices shared, unless other
// claims still use it: the MPS daemon is stopped and the time slice
// restored when the claim was the last to use them. The caller holds the
// claim lock.
func (s *State) releaseSharing(ctx context.Context, claimUID string) error {
	s.mu.Lock()
	c, ok := s.cp.Claims[claimUID]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	for _, d := range c.Devices {
		if d.Sharing == nil {
			continue
		}
		st, known := strategyOf(d.Sharing)
		if known && st.keptByOthers(s, claimUID, d) {
			continue
		}
		err := func() error {
			unlock := s.gpuLocks.lock(d.GPUUUID)
			defer unlock()
			if !known {
				return nil // nothing this gpudra could have set up
			}
			return st.releaseLocked(ctx, s, claimUID, d)
		}()
		if err != nil {
			return fmt.Errorf("device %s: release %s sharing: %w", d.Device, d.Sharing.Strategy, err)
		}
	}
	return nil
}

// sharingEdits are the mounts the device's containers get for its sharing
// (none for a device that is not shared).
func (s *State) sharingEdits(d checkpoint.Device) (gpu.Edits, error) {
	st, ok := strategyOf(d.Sharing)
	if !ok {
		return gpu.Edits{}, nil
	}
	return st.containerEdits(s, d)
}

// sharingEnv is the environment the device's containers get for its
// sharing (none for a device that is not shared).
func sharingEnv(sh *checkpoint.DeviceSharing) []string {
	st, ok := strategyOf(sh)
	if !ok {
		return nil
	}
	return st.clientEnv(sh)
}

// reconcileSharing runs at start-up, after every claim was reconciled
// (prepared claims ensured, half-done ones rolled back): each strategy
// finishes what a plugin that died half-way left of it, and puts back what
// a reboot reset.
func (s *State) reconcileSharing(ctx context.Context, rebooted bool) error {
	var errs []error
	for _, st := range sharingStrategies {
		errs = append(errs, st.reconcile(ctx, s, rebooted)...)
	}
	return errors.Join(errs...)
}
