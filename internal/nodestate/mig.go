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
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// errCrash marks an error from a test hook: the prepare stops there, with
// no rollback, as if the process had been killed.
type errCrash struct{ error }

func (e errCrash) Unwrap() error { return e.error }

func crash(err error) error {
	if err == nil {
		return nil
	}
	return errCrash{err}
}

func isCrash(err error) bool {
	var c errCrash
	return errors.As(err, &c)
}

func placementOf(m *checkpoint.MigDevice) gpu.MigPlacement {
	return gpu.MigPlacement{Start: m.PlacementStart, Size: m.PlacementSize}
}

// migPartitions creates and destroys the MIG partitions of claims, and
// switches MIG mode on and off for them. It keeps no state of its own:
// every step is recorded first in the checkpoint the State holds (the
// claim's MigDevice records, Checkpoint.MigModeEnabled), so that a
// rollback destroys exactly what was created; its methods take that
// State. See docs/mig.md.
type migPartitions struct{}

// prepareMig creates device i's MIG partition: MIG mode on where needed,
// the GPU instance at exactly the allocated placement, then its compute
// instance, recording each step before and after. Operations on one GPU
// are serialized.
func (mp migPartitions) prepareMig(ctx context.Context, s *State, rec *checkpoint.Claim, i int) error {
	hw := s.opts.Hardware
	d := &rec.Devices[i]
	m := d.Mig
	unlock := s.gpuLocks.lock(d.GPUUUID)
	defer unlock()
	logger := klog.FromContext(ctx).WithValues("device", d.Device, "gpu", d.GPUUUID)

	if err := mp.ensureMigModeLocked(ctx, s, hw, rec.UID, d.GPUUUID); err != nil {
		return err
	}

	m.Step = checkpoint.MigCreatingGPUInstance
	if err := s.putClaim(rec.UID, rec); err != nil {
		return fmt.Errorf("record MIG step: %w", err)
	}
	giID, err := hw.CreateGPUInstance(d.GPUUUID, m.ProfileID, placementOf(m))
	if err != nil {
		// Nothing was created: say so, so that no rollback goes looking
		// for an instance at this placement (it may be someone else's).
		m.Step = ""
		if serr := s.putClaim(rec.UID, rec); serr != nil {
			return fmt.Errorf("%w; recording that also failed: %v", err, serr)
		}
		return err
	}
	if h := s.opts.Hooks.AfterGPUInstanceCreated; h != nil {
		if err := h(rec.UID, d.Device); err != nil {
			return crash(err)
		}
	}
	m.GPUInstanceID = &giID
	m.Step = checkpoint.MigCreatingComputeInstance
	if err := s.putClaim(rec.UID, rec); err != nil {
		return fmt.Errorf("record GPU instance %d: %w", giID, err)
	}
	ciID, err := hw.CreateComputeInstance(d.GPUUUID, giID)
	if err != nil {
		return err
	}
	if h := s.opts.Hooks.AfterComputeInstanceCreated; h != nil {
		if err := h(rec.UID, d.Device); err != nil {
			return crash(err)
		}
	}
	m.ComputeInstanceID = &ciID
	uuid, err := hw.MigDeviceUUID(d.GPUUUID, giID, ciID)
	if err != nil {
		return err
	}
	m.UUID = uuid
	m.Step = checkpoint.MigCreated
	if err := s.putClaim(rec.UID, rec); err != nil {
		return fmt.Errorf("record compute instance %d: %w", ciID, err)
	}
	logger.V(2).Info("Created MIG device", "profile", m.Profile, "placementStart", m.PlacementStart, "gpuInstance", giID, "computeInstance", ciID, "uuid", uuid)
	return nil
}

// ensureMigModeLocked turns MIG mode on where it is off, recording first
// that gpudra did, so that it is turned off again once unused even if the
// plugin dies right after. The caller holds the GPU lock.
func (mp migPartitions) ensureMigModeLocked(ctx context.Context, s *State, hw Hardware, claimUID, uuid string) error {
	on, _, err := hw.MigMode(uuid)
	if err != nil {
		return err
	}
	if on {
		return nil
	}
	if err := mp.recordMigMode(s, uuid, true); err != nil {
		return fmt.Errorf("record MIG mode change: %w", err)
	}
	if err := hw.SetMigMode(uuid, true); err != nil {
		return fmt.Errorf("enable MIG mode (a GPU that needs a reset for it must have MIG mode enabled by an admin): %w", err)
	}
	klog.FromContext(ctx).Info("Enabled MIG mode", "gpu", uuid)
	if h := s.opts.Hooks.AfterMigModeEnabled; h != nil {
		if err := h(claimUID, uuid); err != nil {
			return crash(err)
		}
	}
	return nil
}

// destroyMig removes a device's MIG partition, whatever step its creation
// reached, and turns MIG mode off if gpudra turned it on and nothing else
// uses the GPU. An instance is looked up by placement only when the
// checkpoint says its creation was under way: that instance can only be
// this claim's, because the placement was free when it was allocated.
func (mp migPartitions) destroyMig(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	unlock := s.gpuLocks.lock(d.GPUUUID)
	defer unlock()
	err := mp.destroyMigLocked(ctx, s, claimUID, d)
	if errors.Is(err, gpu.ErrGPUGone) {
		// Taken out, or fallen off the bus: the reset or reboot that
		// brings a lost GPU back destroys its instances, so there is
		// nothing left to destroy. Holding the claim for it would keep
		// it unpreparable forever.
		klog.FromContext(ctx).Info("The MIG device's GPU is gone; counting its instance as destroyed",
			"device", d.Device, "gpu", d.GPUUUID, "err", err)
		return nil
	}
	return err
}

// destroyMigLocked is destroyMig under the GPU lock.
func (mp migPartitions) destroyMigLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	hw := s.opts.Hardware
	m := d.Mig
	pl := placementOf(m)
	giID := m.GPUInstanceID
	if giID == nil && m.Step == checkpoint.MigCreatingGPUInstance {
		insts, err := hw.MigInstances(d.GPUUUID)
		if err != nil {
			return err
		}
		for _, inst := range insts {
			if inst.ProfileID == m.ProfileID && inst.Placement == pl && !mp.recordedElsewhere(s, claimUID, d.GPUUUID, inst) {
				id := inst.GIID
				giID = &id
			}
		}
	}
	if giID != nil {
		if m.ComputeInstanceID != nil {
			if err := hw.DestroyComputeInstance(d.GPUUUID, *giID, *m.ComputeInstanceID); err != nil {
				return err
			}
		}
		if err := hw.DestroyGPUInstance(d.GPUUUID, *giID, m.ProfileID, pl); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Destroyed MIG device", "device", d.Device, "gpu", d.GPUUUID, "gpuInstance", *giID)
	}
	return mp.maybeDisableMigModeLocked(ctx, s, hw, claimUID, d.GPUUUID)
}

// recordedElsewhere reports whether another claim's record, in memory or
// on disk, holds inst.
func (mp migPartitions) recordedElsewhere(s *State, claimUID, uuid string, inst gpu.MigInstance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	s.heldLocked(claimUID, func(_ string, c checkpoint.Claim) bool {
		for _, d := range c.Devices {
			if d.GPUUUID == uuid && d.Mig != nil && d.Mig.GPUInstanceID != nil && *d.Mig.GPUInstanceID == inst.GIID {
				found = true
			}
		}
		return found
	})
	return found
}

// maybeDisableMigModeLocked turns MIG mode off on a GPU that gpudra put in
// MIG mode, once no claim but except has a device on it and no instance
// is left (an admin's would keep it on). The caller holds the GPU lock.
func (mp migPartitions) maybeDisableMigModeLocked(ctx context.Context, s *State, hw Hardware, except, uuid string) error {
	s.mu.Lock()
	ours := slices.Contains(s.cp.MigModeEnabled, uuid)
	used := mp.gpuUsedLocked(s, except, uuid)
	s.mu.Unlock()
	if !ours || used {
		return nil
	}
	insts, err := hw.MigInstances(uuid)
	if err != nil {
		return err
	}
	if len(insts) > 0 {
		return nil
	}
	on, _, err := hw.MigMode(uuid)
	if err != nil {
		return err
	}
	if on {
		if err := hw.SetMigMode(uuid, false); err != nil {
			return fmt.Errorf("disable MIG mode: %w", err)
		}
		klog.FromContext(ctx).Info("Disabled MIG mode that gpudra had enabled", "gpu", uuid)
	}
	return mp.recordMigMode(s, uuid, false)
}

// gpuUsedLocked reports whether any claim but except, and but those being
// unprepared, has a device on the GPU. Unlike the checks that keep claims
// apart, it reads memory only. Claims on their way out do not count: a
// claim forgotten in memory whose write is still in flight, or one marked
// UnprepareStarted, has destroyed its MIG devices already or will, and
// its own destroy asks again afterwards; MIG mode is turned off only on a
// GPU without instances, so nothing can be lost. Counting them left MIG
// mode on when the last claims of a GPU unprepared together: the last to
// destroy its partition saw the other, which had destroyed its own but
// was not forgotten yet (TestMigModeOffWhenUnpreparesOverlap).
func (mp migPartitions) gpuUsedLocked(s *State, except, uuid string) bool {
	for uid, c := range s.cp.Claims {
		if uid == except || c.State == checkpoint.UnprepareStarted {
			continue
		}
		for _, d := range c.Devices {
			if d.GPUUUID == uuid {
				return true
			}
		}
	}
	return false
}

// prepareWhole readies a whole GPU of a MIG-capable model: MIG mode must
// be off for CUDA to see the GPU as one device. gpudra turns it off where
// that needs no reset and no instance exists; otherwise the prepare fails
// and says why.
func (mp migPartitions) prepareWhole(ctx context.Context, s *State, g gpu.GPU) error {
	if g.MIG == nil {
		return nil
	}
	hw := s.opts.Hardware
	unlock := s.gpuLocks.lock(g.UUID)
	defer unlock()
	on, _, err := hw.MigMode(g.UUID)
	if err != nil || !on {
		return err
	}
	insts, err := hw.MigInstances(g.UUID)
	if err != nil {
		return err
	}
	if len(insts) > 0 {
		return fmt.Errorf("GPU %s (%s) holds %d MIG instances; it cannot be used whole", g.DeviceName(), g.UUID, len(insts))
	}
	if g.MIG.ModeChangeNeedsReset {
		return fmt.Errorf("GPU %s (%s) is in MIG mode, and turning it off needs a GPU reset", g.DeviceName(), g.UUID)
	}
	if err := hw.SetMigMode(g.UUID, false); err != nil {
		return fmt.Errorf("GPU %s: disable MIG mode: %w", g.DeviceName(), err)
	}
	klog.FromContext(ctx).Info("Disabled MIG mode to hand out the whole GPU", "gpu", g.UUID)
	return mp.recordMigMode(s, g.UUID, false)
}

// ensureMig recreates the MIG partitions of a prepared claim that are gone
// (a reboot or GPU reset destroys every instance), at the same placements,
// and reports whether it did: the claim's CDI spec must then be rewritten
// with the new instances. The caller holds the claim lock.
func (mp migPartitions) ensureMig(ctx context.Context, s *State, rec *checkpoint.Claim) (bool, error) {
	changed := false
	for i := range rec.Devices {
		d := &rec.Devices[i]
		if d.Mig == nil {
			continue
		}
		insts, err := s.opts.Hardware.MigInstances(d.GPUUUID)
		if err != nil {
			return false, err
		}
		alive := false
		for _, inst := range insts {
			if d.Mig.GPUInstanceID != nil && inst.GIID == *d.Mig.GPUInstanceID && inst.ProfileID == d.Mig.ProfileID &&
				inst.Placement == placementOf(d.Mig) && d.Mig.ComputeInstanceID != nil && slices.Contains(inst.ComputeInstances, *d.Mig.ComputeInstanceID) {
				alive = true
			}
		}
		if alive {
			continue
		}
		klog.FromContext(ctx).Info("Recreating a prepared claim's MIG device that is gone", "claim", klog.KRef(rec.Namespace, rec.Name), "device", d.Device)
		d.Mig.GPUInstanceID, d.Mig.ComputeInstanceID, d.Mig.UUID, d.Mig.Step = nil, nil, "", ""
		if err := mp.prepareMig(ctx, s, rec, i); err != nil {
			return false, err
		}
		changed = true
	}
	if changed {
		if err := s.putClaim(rec.UID, rec); err != nil {
			return false, err
		}
	}
	return changed, nil
}

// AdminInstances returns, by GPU UUID, the MIG instances that exist on the
// node's GPUs and that no claim's record accounts for: an admin's (or
// another tool's). gpudra never destroys them; the plugin leaves their
// placements and their GPU unpublished. It is nil when there are none.
func (s *State) AdminInstances() (map[string][]gpu.MigInstance, error) {
	hw := s.opts.Hardware
	var out map[string][]gpu.MigInstance
	var errs []error
	for _, g := range s.opts.Node.GPUs {
		if g.MIG == nil {
			continue
		}
		insts, err := hw.MigInstances(g.UUID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, inst := range insts {
			if !(migPartitions{}).accountedFor(s, g.UUID, inst) {
				if out == nil {
					out = map[string][]gpu.MigInstance{}
				}
				out[g.UUID] = append(out[g.UUID], inst)
			}
		}
	}
	return out, errors.Join(errs...)
}

// accountedFor reports whether a claim's record, in memory or on disk,
// holds the instance, or is creating one at its placement.
func (mp migPartitions) accountedFor(s *State, uuid string, inst gpu.MigInstance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	s.heldLocked("", func(_ string, c checkpoint.Claim) bool {
		for _, d := range c.Devices {
			m := d.Mig
			if d.GPUUUID != uuid || m == nil || m.ProfileID != inst.ProfileID || placementOf(m) != inst.Placement {
				continue
			}
			if (m.GPUInstanceID != nil && *m.GPUInstanceID == inst.GIID) || (m.GPUInstanceID == nil && m.Step == checkpoint.MigCreatingGPUInstance) {
				found = true
			}
		}
		return found
	})
	return found
}

// destroyMigDevices destroys the MIG devices of the claim as recorded, in
// reverse order, and forgets each one's IDs in the record as it goes.
func (mp migPartitions) destroyMigDevices(ctx context.Context, s *State, claimUID string) error {
	s.mu.Lock()
	c, ok := s.cp.Claims[claimUID]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	for i := len(c.Devices) - 1; i >= 0; i-- {
		d := c.Devices[i]
		if d.Mig == nil {
			continue
		}
		if err := mp.destroyMig(ctx, s, claimUID, d); err != nil {
			return fmt.Errorf("device %s: destroy MIG device: %w", d.Device, err)
		}
		if h := s.opts.Hooks.AfterMigDeviceDestroyed; h != nil && c.State == checkpoint.UnprepareStarted {
			if err := h(claimUID, d.Device); err != nil {
				return crash(err)
			}
		}
	}
	return nil
}

// markUnprepareStarted records that the claim's MIG devices are about to
// be destroyed and its sharing torn down; a claim with neither needs no
// such record.
func (s *State) markUnprepareStarted(claimUID string) error {
	s.mu.Lock()
	c, ok := s.cp.Claims[claimUID]
	if !ok || c.State == checkpoint.UnprepareStarted || !slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Mig != nil || d.Sharing != nil }) {
		s.mu.Unlock()
		return nil
	}
	c.State = checkpoint.UnprepareStarted
	gen := s.putClaimLocked(claimUID, &c)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		return fmt.Errorf("record UnprepareStarted: %w", err)
	}
	return nil
}

// recordMigModeLocked adds the GPU to (on) or removes it from the GPUs
// whose MIG mode gpudra enabled, and returns the generation to commit; 0,
// which needs no commit, when the record already says so. The caller holds
// s.mu and the GPU's lock.
func (mp migPartitions) recordMigModeLocked(s *State, uuid string, on bool) uint64 {
	if slices.Contains(s.cp.MigModeEnabled, uuid) == on {
		return 0
	}
	set := func(on bool) {
		list := slices.DeleteFunc(s.cp.MigModeEnabled, func(u string) bool { return u == uuid })
		if on {
			list = append(list, uuid)
			slices.Sort(list)
		}
		s.cp.MigModeEnabled = list
	}
	set(on)
	return s.changedLocked(func() { set(!on) })
}

// recordMigMode is recordMigModeLocked followed by its commit. The caller
// holds the GPU's lock, not s.mu.
func (mp migPartitions) recordMigMode(s *State, uuid string, on bool) error {
	s.mu.Lock()
	gen := mp.recordMigModeLocked(s, uuid, on)
	s.mu.Unlock()
	return s.commit(gen)
}
