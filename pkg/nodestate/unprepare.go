package nodestate

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// Unprepare undoes Prepare. It is idempotent: a claim that is not prepared
// (never was, or already unprepared) is not an error, and a CDI spec left
// for it is removed.
func (s *State) Unprepare(ctx context.Context, ref ClaimRef) error {
	logger := klog.FromContext(ctx).WithValues("claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID)
	unlock := s.claimLocks.lock(ref.UID)
	defer unlock()

	s.mu.Lock()
	_, known := s.cp.Claims[ref.UID]
	s.mu.Unlock()

	// Remove the spec first: if the checkpoint write below fails, the
	// claim is still recorded and the kubelet's retry finishes the job.
	if err := s.opts.CDI.RemoveClaimSpec(ref.UID); err != nil {
		return fmt.Errorf("%s: remove CDI spec: %w", ref, err)
	}
	if !known {
		logger.V(4).Info("Claim not prepared on this node; nothing to unprepare")
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	removed := s.cp.Claims[ref.UID]
	delete(s.cp.Claims, ref.UID)
	if err := s.saveLocked(); err != nil {
		s.cp.Claims[ref.UID] = removed
		return fmt.Errorf("%s: forget claim in checkpoint: %w", ref, err)
	}
	logger.V(2).Info("Unprepared claim", "devices", len(removed.Devices))
	return nil
}
