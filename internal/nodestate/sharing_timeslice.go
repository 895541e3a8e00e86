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

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/gpu"
)

// Time-slicing: the interval is one setting of the whole GPU. gpudra
// records the level it sets (Checkpoint.TimeSlices) before setting it, and
// puts the GPU back to the driver's default once no claim that asked for a
// level other than the default holds the GPU. Claims that share a GPU must
// ask for the same interval; the prepare of one that asks for another
// fails (see claimplan.HeldConflict). NVML cannot read the setting back, so
// gpudra assumes a GPU it never set runs at the default.

// Steps of setting and restoring a time slice, for Hooks.AfterSharingStep.
const (
	StepTimeSliceRecorded = "TimeSliceRecorded"
	StepTimeSliceSet      = "TimeSliceSet"
	StepTimeSliceRestored = "TimeSliceRestored"
)

// timeSlicingStrategy is the time-slicing strategy. Its state is the
// checkpoint's TimeSlices.
type timeSlicingStrategy struct{}

func (timeSlicingStrategy) name() string { return checkpoint.SharingTimeSlicing }

// clientEnv is empty: the time slice is a setting of the GPU, invisible to
// its clients.
func (timeSlicingStrategy) clientEnv(*checkpoint.DeviceSharing) []string { return nil }

// containerEdits is empty, for the same reason.
func (timeSlicingStrategy) containerEdits(*State, checkpoint.Device) (gpu.Edits, error) {
	return gpu.Edits{}, nil
}

// prepareLocked sets the GPU's time slice to the level the claim asked
// for. The caller holds the GPU lock.
func (t timeSlicingStrategy) prepareLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	if d.Mig != nil {
		return nil // MIG devices take only the default interval
	}
	return t.applyTimeSliceLocked(ctx, s, claimUID, d.GPUUUID, d.Sharing.TimeSlice)
}

// keptByOthers is always false: whether another claim keeps the level is
// decided under the GPU lock, by restoreTimeSliceLocked.
func (timeSlicingStrategy) keptByOthers(*State, string, checkpoint.Device) bool { return false }

// releaseLocked restores the default time slice once no other claim asks
// for another. The caller holds the GPU lock.
func (t timeSlicingStrategy) releaseLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	return t.restoreTimeSliceLocked(ctx, s, claimUID, d.GPUUUID)
}

// reconcile restores the default on GPUs whose level no claim asks for any
// more (or forgets a GPU the node no longer has), and after a reboot, which
// resets the time slice, sets it again where claims still ask for it.
func (t timeSlicingStrategy) reconcile(ctx context.Context, s *State, rebooted bool) []error {
	var errs []error
	for uuid, level := range s.TimeSlices() {
		err := func() error {
			unlock := s.gpuLocks.lock(uuid)
			defer unlock()
			s.mu.Lock()
			wanted := t.timeSliceWantedLocked(s, "", uuid)
			s.mu.Unlock()
			if !wanted {
				return t.restoreTimeSliceLocked(ctx, s, "", uuid)
			}
			if rebooted {
				return t.applyTimeSliceLocked(ctx, s, "", uuid, level)
			}
			return nil
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("time slice of GPU %s: %w", uuid, err))
		}
	}
	return errs
}

// applyTimeSliceLocked sets the GPU's level. It sets the hardware even
// when the record says the level is set already: the record may be ahead
// of the GPU (a restore that set the default and failed before it forgot
// the level; a reboot, which resets it), and NVML cannot read the setting
// back to tell. The caller holds the GPU lock.
func (t timeSlicingStrategy) applyTimeSliceLocked(ctx context.Context, s *State, claimUID, uuid string, level int) error {
	s.mu.Lock()
	cur, recorded := s.cp.TimeSlices[uuid]
	s.mu.Unlock()
	if !recorded && level == 0 {
		return nil // the default, which nobody changed
	}
	if !recorded || cur != level {
		if err := t.putTimeSlice(s, uuid, &level); err != nil {
			return err
		}
		if err := s.step(claimUID, StepTimeSliceRecorded); err != nil {
			return err
		}
	}
	if err := s.opts.Hardware.SetTimeSlice(uuid, level); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Set the GPU's time slice", "gpu", uuid, "interval", claimplan.IntervalName(level))
	return s.step(claimUID, StepTimeSliceSet)
}

// restoreTimeSliceLocked puts the GPU back to the default time slice when
// no claim but except asks for another level. The caller holds the GPU
// lock.
func (t timeSlicingStrategy) restoreTimeSliceLocked(ctx context.Context, s *State, except, uuid string) error {
	s.mu.Lock()
	_, recorded := s.cp.TimeSlices[uuid]
	wanted := t.timeSliceWantedLocked(s, except, uuid)
	s.mu.Unlock()
	if !recorded || wanted {
		return nil
	}
	if _, present := s.opts.Node.GPUByUUID(uuid); !present {
		// Taken out of the node: nothing to restore, and nothing could.
		klog.FromContext(ctx).Info("The GPU whose time slice gpudra set is no longer on this node; forgetting it", "gpu", uuid)
		return t.putTimeSlice(s, uuid, nil)
	}
	if err := s.opts.Hardware.SetTimeSlice(uuid, 0); err != nil {
		return fmt.Errorf("restore the default time slice: %w", err)
	}
	if err := s.step(except, StepTimeSliceRestored); err != nil {
		return err
	}
	if err := t.putTimeSlice(s, uuid, nil); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Restored the GPU's default time slice", "gpu", uuid)
	return nil
}

// timeSliceWantedLocked reports whether a claim other than except asks
// for a time slice other than the default on the GPU. A claim being
// unprepared wants nothing any more (two claims unprepared at once must
// not each keep the level for the other). The caller holds s.mu.
func (t timeSlicingStrategy) timeSliceWantedLocked(s *State, except, uuid string) bool {
	for uid, c := range s.cp.Claims {
		if uid == except || c.State == checkpoint.UnprepareStarted {
			continue
		}
		for _, d := range c.Devices {
			if d.GPUUUID == uuid && d.Mig == nil && d.Sharing != nil &&
				d.Sharing.Strategy == checkpoint.SharingTimeSlicing && d.Sharing.TimeSlice != 0 {
				return true
			}
		}
	}
	return false
}

// putTimeSlice records (or, with level nil, forgets) the level gpudra set
// on a GPU and waits until the checkpoint holds it; a failed write takes
// the change back out. The caller holds the GPU's lock.
func (t timeSlicingStrategy) putTimeSlice(s *State, uuid string, level *int) error {
	s.mu.Lock()
	gen := putEntryLocked(s, &s.cp.TimeSlices, uuid, level)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		return fmt.Errorf("record the time slice of GPU %s: %w", uuid, err)
	}
	return nil
}

// TimeSlices returns the time-slice levels gpudra set, by GPU UUID.
func (s *State) TimeSlices() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.cp.TimeSlices))
	for k, v := range s.cp.TimeSlices {
		out[k] = v
	}
	return out
}
