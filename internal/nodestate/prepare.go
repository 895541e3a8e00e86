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
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
)

// Prepare makes the claim's devices of this driver ready for containers and
// returns their CDI device IDs. It is idempotent: preparing a claim that is
// already prepared returns the same devices and creates nothing new (a CDI
// spec lost to a reboot is rewritten).
func (s *State) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]PreparedDevice, error) {
	ref := ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	p := &preparation{
		s:      s,
		ref:    ref,
		logger: klog.FromContext(ctx).WithValues("claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID),
	}

	// One prepare or unprepare per claim at a time: the kubelet may retry a
	// call that timed out while the first is still running.
	unlock := s.claimLocks.lock(ref.UID)
	defer unlock()

	// Until its PrepareStarted is registered, this prepare is arriving:
	// a batch about to be written waits a moment for it (commit.go).
	s.commits.arriving.Add(1)
	defer p.arrive()

	if devices, done, err := p.settleEarlierRecord(ctx); done {
		return devices, err
	}

	// Planning has no side effects and decodes configs, which takes a
	// while: it runs outside s.mu so that it does not hold up the other
	// claims. The claim lock keeps this claim's entry as read above.
	planned, err := p.plan(claim)
	if err != nil {
		return nil, err
	}
	if len(planned) == 0 {
		// Nothing of this driver in the allocation: nothing to set up,
		// and no spec to write (a CDI spec needs at least one device).
		return []PreparedDevice{}, nil
	}
	if err := p.checkIMEXReady(ctx, planned); err != nil {
		return nil, err
	}
	record, err := p.recordOf(planned)
	if err != nil {
		return nil, err
	}
	if channelsOnly(planned) && s.checkpointOnDisk() {
		return p.prepareChannels(ctx, planned, record)
	}
	if err := p.recordStarted(planned, &record); err != nil {
		return nil, err
	}
	if err := p.setUpDevices(ctx, planned, &record); err != nil {
		return nil, err
	}
	return p.complete(ctx, record)
}

// preparation is one Prepare in progress, under its claim's lock: the
// claim, its logger, and whether it still counts as arriving for the
// group commit (commit.go). Its steps are in the order Prepare takes
// them.
type preparation struct {
	s      *State
	ref    ClaimRef
	logger klog.Logger
	// arrived is set once the prepare stopped counting in
	// s.commits.arriving; only the prepare's own goroutine reads it.
	arrived bool
}

// arrive stops counting the prepare as arriving: its first change is
// registered, or it will write nothing a batch should wait for.
func (p *preparation) arrive() {
	if !p.arrived {
		p.arrived = true
		p.s.commits.arriving.Add(-1)
	}
}

// settleEarlierRecord deals with what the checkpoint already holds of the
// claim. A completed prepare is ensured (its MIG devices, sharing and
// spec) and returned; a record in a state this gpudra does not know is
// refused; one that is not complete (a prepare or unprepare that failed
// half-way without a restart) is rolled back first, so that what it
// created is destroyed rather than left in the way of this prepare. done
// says whether Prepare ends here, with devices and err.
func (p *preparation) settleEarlierRecord(ctx context.Context) (devices []PreparedDevice, done bool, err error) {
	s, ref := p.s, p.ref
	s.mu.Lock()
	existing, known := s.cp.Claims[ref.UID]
	s.mu.Unlock()
	if !known {
		return nil, false, nil
	}
	if existing.State == checkpoint.PrepareCompleted {
		p.arrive()
		if _, err := s.ensurePrepared(ctx, &existing); err != nil {
			return nil, true, fmt.Errorf("%s: %w", ref, err)
		}
		p.logger.V(4).Info("Claim already prepared", "devices", len(existing.Devices))
		return toPrepared(existing.Devices), true, nil
	}
	// A record in a state this gpudra does not know came from a newer one:
	// redoing the prepare would first roll back whatever that one did.
	if !existing.State.Known() {
		return nil, true, claimplan.Wrap(claimplan.UnknownRecord, fmt.Errorf("%s is recorded in state %q, which this gpudra does not know (was it written by a newer gpudra before a downgrade?); it is kept as it is: upgrade gpudra again, or unprepare the claim (delete the pods that use it)", ref, existing.State))
	}
	p.arrive() // the rollback writes first; the batch need not wait
	if err := s.rollback(ctx, ref); err != nil {
		return nil, true, claimplan.Wrap(claimplan.RollbackFailed, fmt.Errorf("%s: roll back the unfinished earlier attempt: %w", ref, err))
	}
	return nil, false, nil
}

// checkIMEXReady checks that each channel's domain has a ready IMEX daemon
// here, before anything is recorded: not ready is a failure the kubelet
// retries.
func (p *preparation) checkIMEXReady(ctx context.Context, planned []plannedDevice) error {
	imex := p.s.opts.IMEX
	if imex == nil {
		imex = AlwaysReady{}
	}
	for _, d := range planned {
		if d.Channel == nil {
			continue
		}
		if err := imex.Ready(ctx, d.Channel.Domain); err != nil {
			return fmt.Errorf("%s: device %s: the IMEX daemon of NVLink domain %s is not ready on this node: %w", p.ref, d.Result.Device, d.Channel.Domain, err)
		}
	}
	return nil
}

// recordStarted records the claim as PrepareStarted, with the devices it
// is about to receive, before anything is created for it. The in-use
// check and the record happen under one hold of s.mu, so two claims
// racing for one GPU cannot both pass the check.
func (p *preparation) recordStarted(planned []plannedDevice, record *checkpoint.Claim) error {
	s, ref := p.s, p.ref
	record.State = checkpoint.PrepareStarted
	s.mu.Lock()
	if err := p.checkNotInUseLocked(planned); err != nil {
		s.mu.Unlock()
		return err
	}
	gen := s.putClaimLocked(ref.UID, record)
	s.mu.Unlock()
	p.arrive()
	if err := s.commit(gen); err != nil {
		return claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("%s: record PrepareStarted: %w", ref, err))
	}
	if h := s.opts.Hooks.AfterPrepareStarted; h != nil {
		return h(ref.UID)
	}
	return nil
}

// setUpDevices creates what each device needs: its MIG partition, one
// step at a time, each recorded (whole GPUs of MIG-capable models need MIG
// mode off), then its sharing. A failure rolls the claim back; a test
// hook's crash stops on the spot.
func (p *preparation) setUpDevices(ctx context.Context, planned []plannedDevice, record *checkpoint.Claim) error {
	s := p.s
	for i, d := range planned {
		if d.Channel != nil {
			continue // a channel has nothing to set up but its CDI spec
		}
		var err error
		if d.Mig != nil {
			err = claimplan.Wrap(claimplan.MIGSetup, (migPartitions{}).prepareMig(ctx, s, record, i))
		} else if !d.Admin() {
			err = claimplan.Wrap(claimplan.WholeGPUSetup, (migPartitions{}).prepareWhole(ctx, s, d.GPU))
		}
		if err == nil {
			err = claimplan.Wrap(claimplan.SharingSetup, s.prepareSharing(ctx, record, i))
		}
		if isCrash(err) {
			return err
		}
		if err != nil {
			return p.fail(ctx, fmt.Errorf("device %s: %w", d.Result.Device, err))
		}
	}
	return nil
}

// complete writes the claim's CDI spec and records it PrepareCompleted.
func (p *preparation) complete(ctx context.Context, record checkpoint.Claim) ([]PreparedDevice, error) {
	s, ref := p.s, p.ref
	// The CDI spec is written outside s.mu: claims prepare concurrently.
	if err := s.writeSpec(record); err != nil {
		return nil, p.fail(ctx, claimplan.Wrap(claimplan.CDISpec, err))
	}
	if h := s.opts.Hooks.BeforePrepareCompleted; h != nil {
		if err := h(ref.UID); err != nil {
			return nil, err
		}
	}
	record.State = checkpoint.PrepareCompleted
	if err := s.putClaim(record.UID, &record); err != nil {
		if isCrash(err) {
			return nil, err
		}
		// The checkpoint still says PrepareStarted, so the next start-up
		// would roll the claim back under whatever container the kubelet
		// started with it: undo now, report failure, and let the kubelet
		// retry.
		return nil, p.fail(ctx, claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("record PrepareCompleted: %w", err)))
	}
	p.logger.V(2).Info("Prepared claim", "devices", len(record.Devices))
	return toPrepared(record.Devices), nil
}

// channelsOnly says whether a claim holds IMEX channels and nothing else.
func channelsOnly(planned []claimplan.Device) bool {
	for _, p := range planned {
		if p.Channel == nil {
			return false
		}
	}
	return len(planned) > 0
}

// prepareChannels prepares a claim of IMEX channels only, the claim every
// pod of a multi-node job prepares, replacement pods included. A channel
// sets up nothing on the node but its CDI spec, so there is nothing to
// roll back from and no PrepareStarted record to make: the spec is
// written, then the claim recorded once, complete. That is one checkpoint
// write instead of two. A crash between the two leaves a spec that no
// record holds, which start-up removes as stale (Reconcile); the kubelet
// then prepares the claim again. A failure here removes the spec.
func (p *preparation) prepareChannels(ctx context.Context, planned []plannedDevice, record checkpoint.Claim) ([]PreparedDevice, error) {
	s, ref := p.s, p.ref
	p.arrive() // nothing recorded until the spec is written: no batch waits for it
	if err := s.writeSpec(record); err != nil {
		return nil, p.failChannels(claimplan.Wrap(claimplan.CDISpec, err))
	}
	if h := s.opts.Hooks.BeforePrepareCompleted; h != nil {
		if err := h(ref.UID); err != nil {
			return nil, err
		}
	}
	record.State = checkpoint.PrepareCompleted
	// The in-use check and the record under one hold of s.mu, as for
	// every claim.
	s.mu.Lock()
	if err := p.checkNotInUseLocked(planned); err != nil {
		s.mu.Unlock()
		return nil, p.failChannels(err)
	}
	gen := s.putClaimLocked(ref.UID, &record)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		if isCrash(err) {
			return nil, err
		}
		return nil, p.failChannels(claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("record PrepareCompleted: %w", err)))
	}
	p.logger.V(2).Info("Prepared claim", "devices", len(record.Devices))
	return toPrepared(record.Devices), nil
}

// checkpointOnDisk says whether the checkpoint file exists. Until it
// does (a fresh node), a spec without a record would read as a lost
// checkpoint at the next start-up (checkNothingPrepared), so a channel
// claim takes the two-write path that records it first.
func (s *State) checkpointOnDisk() bool {
	if s.onDisk.Load() {
		return true
	}
	exists, err := s.opts.Checkpoint.Exists()
	if err != nil || !exists {
		return false
	}
	s.onDisk.Store(true)
	return true
}

// failChannels removes the spec of a channel claim whose prepare failed
// (no record holds it) and returns the error for the kubelet.
func (p *preparation) failChannels(err error) error {
	ref := p.ref
	if rerr := p.s.opts.CDI.RemoveClaimSpec(ref.UID); rerr != nil {
		return fmt.Errorf("%s: %w; removing its CDI spec also failed: %v", ref, err, rerr)
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// fail rolls back a prepare that got past PrepareStarted and returns
// the error for the kubelet, with the rollback's own failure if any.
func (p *preparation) fail(ctx context.Context, err error) error {
	ref := p.ref
	if rerr := p.s.rollback(ctx, ref); rerr != nil {
		return fmt.Errorf("%s: %w; rolling back also failed: %v", ref, err, rerr)
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// checkNotInUseLocked is the last line of defence against handing one GPU
// to two unrelated claims (claimplan.HeldConflict): the scheduler should
// never allocate it twice, but a stale allocation or a bug must not leak
// one tenant's GPU to another.
//
// A device that memory or the file says is taken is taken: a claim
// forgotten in memory frees its devices once that is on disk.
func (p *preparation) checkNotInUseLocked(planned []plannedDevice) error {
	s, ref := p.s, p.ref
	for _, pd := range planned {
		if err := p.checkShareFitsLocked(pd); err != nil {
			return err
		}
		var err error
		s.heldLocked(ref.UID, func(uid string, other checkpoint.Claim) bool {
			for _, d := range other.Devices {
				holder := ClaimRef{UID: uid, Namespace: other.Namespace, Name: other.Name}
				if r := claimplan.HeldConflict(pd, d, holder.String()); r != nil {
					err = fmt.Errorf("%s: %w", ref, r)
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// recordOf turns the plan into the checkpoint entry, including the CDI device
// IDs, which are a pure function of the claim UID and device name.
func (p *preparation) recordOf(planned []plannedDevice) (checkpoint.Claim, error) {
	ref := p.ref
	c := checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name}
	for _, pd := range planned {
		raw, err := json.Marshal(pd.Config)
		if err != nil {
			return c, fmt.Errorf("%s: encode config for %s: %w", ref, pd.Result.Device, err)
		}
		d := pd.Held()
		d.Env = configEnv(pd.Config)
		d.Config = raw
		d.CDIDeviceIDs = []string{p.s.opts.CDI.DeviceID(ref.UID, pd.Result.Device)}
		d.Env = append(d.Env, sharingEnv(pd.Sharing)...)
		c.Devices = append(c.Devices, d)
	}
	return c, nil
}

// rollback undoes a prepare that did not complete: it removes the claim's
// CDI spec, then forgets the claim. The claim is forgotten only once its
// spec is gone, so that the checkpoint keeps saying "half done, devices
// taken" for as long as a container could still be given the devices.
// The caller holds the claim's lock.
func (s *State) rollback(ctx context.Context, ref ClaimRef) error {
	if err := s.opts.CDI.RemoveClaimSpec(ref.UID); err != nil {
		return err
	}
	if err := s.releaseSharing(ctx, ref.UID); err != nil {
		return err
	}
	if err := (migPartitions{}).destroyMigDevices(ctx, s, ref.UID); err != nil {
		return err
	}
	if err := s.putClaim(ref.UID, nil); err != nil {
		return fmt.Errorf("forget claim: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Rolled back claim", "claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID)
	return nil
}
