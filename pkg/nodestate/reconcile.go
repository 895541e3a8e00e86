package nodestate

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/checkpoint"
)

// ReconcileReport says what Reconcile changed, for logs and tests.
type ReconcileReport struct {
	// Rebooted is true when the checkpoint was written in an earlier boot.
	Rebooted bool
	// RolledBack lists claims that were PrepareStarted: a plugin died
	// mid-prepare. Their partial work is undone; the kubelet retries.
	RolledBack []string
	// Rewritten lists prepared claims whose CDI spec was missing.
	Rewritten []string
	// RemovedStale lists CDI specs of claims the checkpoint does not hold.
	RemovedStale []string
}

// Reconcile brings the node in line with the checkpoint at start-up, before
// the plugin serves the kubelet: half-prepared claims are rolled back,
// prepared claims get their CDI specs back (a reboot empties /var/run/cdi),
// and specs of claims that are not prepared are removed so that no container
// can be started with a device it no longer owns.
func (s *State) Reconcile(ctx context.Context) (ReconcileReport, error) {
	logger := klog.FromContext(ctx)
	var report ReconcileReport
	var errs []error

	s.mu.Lock()
	report.Rebooted = s.cp.BootID != "" && s.cp.BootID != s.opts.BootID
	claims := make([]checkpoint.Claim, 0, len(s.cp.Claims))
	for _, c := range s.cp.Claims {
		claims = append(claims, c)
	}
	s.mu.Unlock()

	for _, c := range claims {
		ref := ClaimRef{UID: c.UID, Namespace: c.Namespace, Name: c.Name}
		switch c.State {
		case checkpoint.PrepareCompleted:
			ok, err := s.opts.CDI.ClaimSpecExists(c.UID)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", ref, err))
				continue
			}
			if ok {
				continue
			}
			if err := s.writeSpec(c); err != nil {
				errs = append(errs, fmt.Errorf("%s: rewrite CDI spec: %w", ref, err))
				continue
			}
			report.Rewritten = append(report.Rewritten, c.UID)
		default:
			// PrepareStarted (or a state this version does not know):
			// the prepare never finished, so no container can be using
			// the devices. Undo and let the kubelet retry.
			s.rollback(ctx, ref)
			report.RolledBack = append(report.RolledBack, c.UID)
		}
	}

	specs, err := s.opts.CDI.ListClaimUIDs()
	if err != nil {
		errs = append(errs, fmt.Errorf("list CDI specs: %w", err))
	}
	s.mu.Lock()
	known := map[string]bool{}
	for uid := range s.cp.Claims {
		known[uid] = true
	}
	s.mu.Unlock()
	for _, uid := range specs {
		if known[uid] {
			continue
		}
		if err := s.opts.CDI.RemoveClaimSpec(uid); err != nil {
			errs = append(errs, fmt.Errorf("remove stale CDI spec of claim %s: %w", uid, err))
			continue
		}
		report.RemovedStale = append(report.RemovedStale, uid)
	}

	// Record the current boot ID so the next start can tell a reboot.
	s.mu.Lock()
	if err := s.saveLocked(); err != nil {
		errs = append(errs, err)
	}
	s.mu.Unlock()

	logger.Info("Reconciled node state with checkpoint",
		"rebooted", report.Rebooted, "prepared", len(known),
		"rolledBack", len(report.RolledBack), "rewrittenSpecs", len(report.Rewritten), "removedStaleSpecs", len(report.RemovedStale))
	return report, errors.Join(errs...)
}
