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
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Prepare makes the claim's devices of this driver ready for containers and
// returns their CDI device IDs. It is idempotent: preparing a claim that is
// already prepared returns the same devices and creates nothing new (a CDI
// spec lost to a reboot is rewritten).
func (s *State) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]PreparedDevice, error) {
	ref := ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	logger := klog.FromContext(ctx).WithValues("claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID)

	// One prepare or unprepare per claim at a time: the kubelet may retry a
	// call that timed out while the first is still running.
	unlock := s.claimLocks.lock(ref.UID)
	defer unlock()

	// Until its PrepareStarted is registered, this prepare is arriving:
	// a batch about to be written waits a moment for it (commit.go).
	s.commits.arriving.Add(1)
	arrived := false
	arrive := func() {
		if !arrived {
			arrived = true
			s.commits.arriving.Add(-1)
		}
	}
	defer arrive()

	s.mu.Lock()
	existing, known := s.cp.Claims[ref.UID]
	s.mu.Unlock()
	if known && existing.State == checkpoint.PrepareCompleted {
		arrive()
		if _, err := s.ensurePrepared(ctx, &existing); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		logger.V(4).Info("Claim already prepared", "devices", len(existing.Devices))
		return toPrepared(existing.Devices), nil
	}

	// A record in a state this gpudra does not know came from a newer one:
	// redoing the prepare would first roll back whatever that one did.
	if known && !existing.State.Known() {
		return nil, claimplan.Wrap(claimplan.UnknownRecord, fmt.Errorf("%s is recorded in state %q, which this gpudra does not know (was it written by a newer gpudra before a downgrade?); it is kept as it is: upgrade gpudra again, or unprepare the claim (delete the pods that use it)", ref, existing.State))
	}
	// A record that is not complete (a prepare or unprepare that failed
	// half-way without a restart) is rolled back first, so that what it
	// created is destroyed rather than left in the way of this prepare.
	if known {
		arrive() // the rollback writes first; the batch need not wait
		if err := s.rollback(ctx, ref); err != nil {
			return nil, claimplan.Wrap(claimplan.RollbackFailed, fmt.Errorf("%s: roll back the unfinished earlier attempt: %w", ref, err))
		}
	}

	// Planning has no side effects and decodes configs, which takes a
	// while: it runs outside s.mu so that it does not hold up the other
	// claims. The claim lock keeps this claim's entry as read above.
	planned, err := s.plan(ref, claim)
	if err != nil {
		return nil, err
	}
	if len(planned) == 0 {
		// Nothing of this driver in the allocation: nothing to set up,
		// and no spec to write (a CDI spec needs at least one device).
		return []PreparedDevice{}, nil
	}
	// A channel's domain must have a ready IMEX daemon here before
	// anything is recorded: not ready is a failure the kubelet retries.
	for _, p := range planned {
		if p.Channel == nil {
			continue
		}
		imex := s.opts.IMEX
		if imex == nil {
			imex = AlwaysReady{}
		}
		if err := imex.Ready(ctx, p.Channel.Domain); err != nil {
			return nil, fmt.Errorf("%s: device %s: the IMEX daemon of NVLink domain %s is not ready on this node: %w", ref, p.Result.Device, p.Channel.Domain, err)
		}
	}
	record, err := s.record(ref, planned)
	if err != nil {
		return nil, err
	}
	if channelsOnly(planned) && s.checkpointOnDisk() {
		return s.prepareChannels(ctx, ref, planned, record, arrive)
	}
	record.State = checkpoint.PrepareStarted

	// The in-use check and the PrepareStarted record happen under one hold
	// of s.mu, so two claims racing for one GPU cannot both pass the check.
	s.mu.Lock()
	if err := s.checkNotInUseLocked(ref, planned); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	gen := s.putClaimLocked(ref.UID, &record)
	s.mu.Unlock()
	arrive()
	if err := s.commit(gen); err != nil {
		return nil, claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("%s: record PrepareStarted: %w", ref, err))
	}

	if h := s.opts.Hooks.AfterPrepareStarted; h != nil {
		if err := h(ref.UID); err != nil {
			return nil, err
		}
	}

	// MIG partitions are created one step at a time, each recorded; whole
	// GPUs of MIG-capable models need MIG mode off.
	for i, p := range planned {
		var err error
		if p.Channel != nil {
			continue // a channel has nothing to set up but its CDI spec
		}
		if p.Mig != nil {
			err = claimplan.Wrap(claimplan.MIGSetup, (migPartitions{}).prepareMig(ctx, s, &record, i))
		} else if !p.Admin() {
			err = claimplan.Wrap(claimplan.WholeGPUSetup, (migPartitions{}).prepareWhole(ctx, s, p.GPU))
		}
		if err == nil {
			err = claimplan.Wrap(claimplan.SharingSetup, s.prepareSharing(ctx, &record, i))
		}
		if isCrash(err) {
			return nil, err
		}
		if err != nil {
			return nil, s.failPrepare(ctx, ref, fmt.Errorf("device %s: %w", p.Result.Device, err))
		}
	}

	// The CDI spec is written outside s.mu: claims prepare concurrently.
	if err := s.writeSpec(record); err != nil {
		return nil, s.failPrepare(ctx, ref, claimplan.Wrap(claimplan.CDISpec, err))
	}
	if h := s.opts.Hooks.BeforePrepareCompleted; h != nil {
		if err := h(ref.UID); err != nil {
			return nil, err
		}
	}

	record.State = checkpoint.PrepareCompleted
	if err := s.saveRecord(&record); err != nil {
		if isCrash(err) {
			return nil, err
		}
		// The checkpoint still says PrepareStarted, so the next start-up
		// would roll the claim back under whatever container the kubelet
		// started with it: undo now, report failure, and let the kubelet
		// retry.
		return nil, s.failPrepare(ctx, ref, claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("record PrepareCompleted: %w", err)))
	}
	logger.V(2).Info("Prepared claim", "devices", len(record.Devices))
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
func (s *State) prepareChannels(ctx context.Context, ref ClaimRef, planned []claimplan.Device, record checkpoint.Claim, arrive func()) ([]PreparedDevice, error) {
	arrive() // nothing recorded until the spec is written: no batch waits for it
	if err := s.writeSpec(record); err != nil {
		return nil, s.failChannels(ref, claimplan.Wrap(claimplan.CDISpec, err))
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
	if err := s.checkNotInUseLocked(ref, planned); err != nil {
		s.mu.Unlock()
		return nil, s.failChannels(ref, err)
	}
	gen := s.putClaimLocked(ref.UID, &record)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		if isCrash(err) {
			return nil, err
		}
		return nil, s.failChannels(ref, claimplan.Wrap(claimplan.CheckpointWrite, fmt.Errorf("record PrepareCompleted: %w", err)))
	}
	klog.FromContext(ctx).V(2).Info("Prepared claim", "claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID, "devices", len(record.Devices))
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
func (s *State) failChannels(ref ClaimRef, err error) error {
	if rerr := s.opts.CDI.RemoveClaimSpec(ref.UID); rerr != nil {
		return fmt.Errorf("%s: %w; removing its CDI spec also failed: %v", ref, err, rerr)
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// failPrepare rolls back a prepare that got past PrepareStarted and returns
// the error for the kubelet, with the rollback's own failure if any.
func (s *State) failPrepare(ctx context.Context, ref ClaimRef, err error) error {
	if rerr := s.rollback(ctx, ref); rerr != nil {
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
func (s *State) checkNotInUseLocked(ref ClaimRef, planned []plannedDevice) error {
	for _, p := range planned {
		if err := s.checkShareFitsLocked(ref, p); err != nil {
			return err
		}
		var err error
		s.heldLocked(ref.UID, func(uid string, other checkpoint.Claim) bool {
			for _, d := range other.Devices {
				holder := ClaimRef{UID: uid, Namespace: other.Namespace, Name: other.Name}
				if r := claimplan.HeldConflict(p, d, holder.String()); r != nil {
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

// record turns the plan into the checkpoint entry, including the CDI device
// IDs, which are a pure function of the claim UID and device name.
func (s *State) record(ref ClaimRef, planned []plannedDevice) (checkpoint.Claim, error) {
	c := checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name}
	for _, p := range planned {
		raw, err := json.Marshal(p.Config)
		if err != nil {
			return c, fmt.Errorf("%s: encode config for %s: %w", ref, p.Result.Device, err)
		}
		d := p.Held()
		d.Env = configEnv(p.Config)
		d.Config = raw
		d.CDIDeviceIDs = []string{s.opts.CDI.DeviceID(ref.UID, p.Result.Device)}
		d.Env = append(d.Env, sharingEnv(p.Sharing)...)
		c.Devices = append(c.Devices, d)
	}
	return c, nil
}

// visibleDevicesPrefix starts the NVIDIA_VISIBLE_DEVICES entry that
// gpudra once put in each device's environment (records written before
// visibility moved to device nodes still hold it).
const visibleDevicesPrefix = "NVIDIA_VISIBLE_DEVICES="

// capabilitiesPrefix starts a device's NVIDIA_DRIVER_CAPABILITIES entry.
var capabilitiesPrefix = configapi.DriverCapabilitiesEnvVar + "="

// driverCapabilities is the union of the driver capabilities the claim's
// devices were configured with: the claim's CDI spec gives every container
// that uses any of them the driver files of all (a container can use
// several requests; it gets at least what each asked for).
func driverCapabilities(c checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		for _, e := range d.Env {
			if list, ok := strings.CutPrefix(e, capabilitiesPrefix); ok {
				for _, cap := range strings.Split(list, ",") {
					if cap != "" && !slices.Contains(out, cap) {
						out = append(out, cap)
					}
				}
			}
		}
	}
	return out
}

// configEnv is the environment a config asks for.
func configEnv(cfg configapi.Config) []string {
	if c, ok := cfg.(interface{ DriverCapabilitiesEnv() string }); ok {
		return []string{c.DriverCapabilitiesEnv()}
	}
	return nil
}

// writeSpec writes the claim's CDI spec from its checkpoint record, so a
// spec rewritten after a reboot is identical to the one first written.
func (s *State) writeSpec(c checkpoint.Claim) error {
	devices := make([]cdispec.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		if ch := d.Channel; ch != nil {
			edits, err := s.channelEdits(gpu.IMEXChannel{Domain: ch.Domain, Number: ch.Number})
			if err != nil {
				return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
			}
			devices = append(devices, cdispec.Device{Name: d.Device, Edits: edits})
			continue
		}
		g, ok := s.node().GPUByUUID(d.GPUUUID)
		if !ok {
			return fmt.Errorf("write CDI spec: device %s: GPU %s is no longer present on this node", d.Device, d.GPUUUID)
		}
		// Append copies: the backend may hand out edits it keeps, and
		// appending the claim's env in place would write into them while
		// another claim (admin access) reads them.
		base := s.opts.Hardware.DeviceEdits(g)
		if m := d.Mig; m != nil {
			if m.Step != checkpoint.MigCreated || m.GPUInstanceID == nil || m.ComputeInstanceID == nil {
				return fmt.Errorf("write CDI spec: device %s: its MIG device was not created", d.Device)
			}
			var err error
			if base, err = s.opts.Hardware.MigDeviceEdits(g, *m.GPUInstanceID, *m.ComputeInstanceID, m.UUID); err != nil {
				return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
			}
		}
		// A container sees the GPUs whose device nodes it gets, from every
		// request and claim it uses; NVIDIA_VISIBLE_DEVICES (one value,
		// which the last device applied would set) is no longer per device.
		env := slices.DeleteFunc(slices.Clone(d.Env), func(e string) bool { return strings.HasPrefix(e, visibleDevicesPrefix) })
		sharing, err := s.sharingEdits(d)
		if err != nil {
			return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
		}
		edits := base.Append(gpu.Edits{Env: env}).Append(sharing)
		devices = append(devices, cdispec.Device{Name: d.Device, Edits: edits})
	}
	// The Writer's errors already say "write CDI spec for claim <uid>".
	return s.opts.CDI.WriteClaimSpec(c.UID, s.opts.Hardware.CommonEdits(driverCapabilities(c)), devices)
}

// ensurePrepared recreates a prepared claim's MIG devices if they are gone,
// makes sure its sharing is in place (MPS daemons answer, time slices set),
// and rewrites its CDI spec if it is missing or the MIG devices were
// recreated. It says whether it rewrote the spec; c is updated. The caller
// holds the claim lock.
func (s *State) ensurePrepared(ctx context.Context, c *checkpoint.Claim) (bool, error) {
	rec := c.Clone()
	recreated, err := (migPartitions{}).ensureMig(ctx, s, &rec)
	if err != nil {
		return false, claimplan.Wrap(claimplan.MIGSetup, err)
	}
	*c = rec
	for i := range rec.Devices {
		if err := s.prepareSharing(ctx, &rec, i); err != nil {
			return false, claimplan.Wrap(claimplan.SharingSetup, fmt.Errorf("device %s: %w", rec.Devices[i].Device, err))
		}
	}
	if recreated {
		return true, claimplan.Wrap(claimplan.CDISpec, s.writeSpec(rec))
	}
	rewritten, err := s.ensureSpec(ctx, rec)
	return rewritten, claimplan.Wrap(claimplan.CDISpec, err)
}

// ensureSpec rewrites a prepared claim's CDI spec if it is missing, and
// says whether it did: /var/run/cdi is a tmpfs, so a reboot loses every
// spec while the checkpoint survives.
func (s *State) ensureSpec(ctx context.Context, c checkpoint.Claim) (rewritten bool, err error) {
	ok, err := s.opts.CDI.ClaimSpecExists(c.UID)
	if err != nil || ok {
		return false, err
	}
	klog.FromContext(ctx).Info("Rewriting missing CDI spec of a prepared claim", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID)
	return true, s.writeSpec(c)
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
