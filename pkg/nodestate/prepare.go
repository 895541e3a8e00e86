package nodestate

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/cdispec"
	"github.com/gpudra/gpudra/pkg/checkpoint"
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

	s.mu.Lock()
	if existing, ok := s.cp.Claims[ref.UID]; ok && existing.State == checkpoint.PrepareCompleted {
		s.mu.Unlock()
		if err := s.ensureSpec(ctx, existing); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		logger.V(4).Info("Claim already prepared", "devices", len(existing.Devices))
		return toPrepared(existing.Devices), nil
	}

	planned, err := s.plan(ref, claim)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if err := s.checkNotInUseLocked(ref, planned); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	record, err := s.record(ref, planned)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	record.State = checkpoint.PrepareStarted
	s.cp.Claims[ref.UID] = record
	if err := s.saveLocked(); err != nil {
		delete(s.cp.Claims, ref.UID)
		s.mu.Unlock()
		return nil, fmt.Errorf("%s: record PrepareStarted: %w", ref, err)
	}
	s.mu.Unlock()

	if h := s.opts.Hooks.AfterPrepareStarted; h != nil {
		if err := h(ref.UID); err != nil {
			return nil, err
		}
	}

	// The CDI spec is written outside the lock: claims prepare concurrently.
	if err := s.writeSpec(record); err != nil {
		s.rollback(ctx, ref)
		return nil, fmt.Errorf("%s: %w", ref, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	record.State = checkpoint.PrepareCompleted
	s.cp.Claims[ref.UID] = record
	if err := s.saveLocked(); err != nil {
		// The spec exists but the checkpoint still says PrepareStarted:
		// report failure so the kubelet retries; the retry or the next
		// start-up reconciles.
		return nil, fmt.Errorf("%s: record PrepareCompleted: %w", ref, err)
	}
	logger.V(2).Info("Prepared claim", "devices", len(record.Devices))
	return toPrepared(record.Devices), nil
}

// checkNotInUseLocked is the last line of defence against handing one GPU
// to two unrelated claims: the scheduler should never allocate it twice, but
// a stale allocation or a bug must not leak one tenant's GPU to another.
// Devices allocated with admin access may overlap (monitoring).
func (s *State) checkNotInUseLocked(ref ClaimRef, planned []plannedDevice) error {
	for _, p := range planned {
		if isAdmin(p.result) {
			continue
		}
		for uid, other := range s.cp.Claims {
			if uid == ref.UID {
				continue
			}
			for _, d := range other.Devices {
				if d.Device == p.result.Device && !d.AdminAccess {
					return fmt.Errorf("%s: request %q: device %s is already prepared for ResourceClaim %s/%s (UID %s); refusing to give one GPU to two claims",
						ref, p.result.Request, p.result.Device, other.Namespace, other.Name, uid)
				}
			}
		}
	}
	return nil
}

func isAdmin(r resourceapi.DeviceRequestAllocationResult) bool {
	return r.AdminAccess != nil && *r.AdminAccess
}

// record turns the plan into the checkpoint entry, including the CDI device
// IDs, which are a pure function of the claim UID and device name.
func (s *State) record(ref ClaimRef, planned []plannedDevice) (checkpoint.Claim, error) {
	reqEnv := requestEnv(planned)
	c := checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name}
	for _, p := range planned {
		raw, err := json.Marshal(p.config)
		if err != nil {
			return c, fmt.Errorf("%s: encode config for %s: %w", ref, p.result.Device, err)
		}
		c.Devices = append(c.Devices, checkpoint.Device{
			Requests:     []string{p.result.Request},
			Pool:         p.result.Pool,
			Device:       p.result.Device,
			GPUUUID:      p.gpu.UUID,
			AdminAccess:  isAdmin(p.result),
			Env:          append(reqEnv[p.result.Request], configEnv(p.config)...),
			Config:       raw,
			CDIDeviceIDs: []string{s.opts.CDI.DeviceID(ref.UID, p.result.Device)},
		})
	}
	return c, nil
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
		g, ok := s.node().GPUByUUID(d.GPUUUID)
		if !ok {
			return fmt.Errorf("device %s: GPU %s is no longer present on this node", d.Device, d.GPUUUID)
		}
		edits := s.opts.Hardware.DeviceEdits(g)
		edits.Env = append(edits.Env, d.Env...)
		devices = append(devices, cdispec.Device{Name: d.Device, Edits: edits})
	}
	if err := s.opts.CDI.WriteClaimSpec(c.UID, s.opts.Hardware.CommonEdits(), devices); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// ensureSpec rewrites a prepared claim's CDI spec if it is missing:
// /var/run/cdi is a tmpfs, so a reboot loses every spec while the
// checkpoint survives.
func (s *State) ensureSpec(ctx context.Context, c checkpoint.Claim) error {
	ok, err := s.opts.CDI.ClaimSpecExists(c.UID)
	if err != nil {
		return fmt.Errorf("check CDI spec: %w", err)
	}
	if ok {
		return nil
	}
	klog.FromContext(ctx).Info("Rewriting missing CDI spec of a prepared claim", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID)
	return s.writeSpec(c)
}

// rollback removes whatever a failed prepare left and forgets the claim.
func (s *State) rollback(ctx context.Context, ref ClaimRef) {
	logger := klog.FromContext(ctx)
	if err := s.opts.CDI.RemoveClaimSpec(ref.UID); err != nil {
		logger.Error(err, "Roll back: remove CDI spec", "claimUID", ref.UID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cp.Claims, ref.UID)
	if err := s.saveLocked(); err != nil {
		logger.Error(err, "Roll back: forget claim in checkpoint", "claimUID", ref.UID)
	}
}
