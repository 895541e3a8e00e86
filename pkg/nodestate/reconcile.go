package nodestate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/checkpoint"
	"github.com/gpudra/gpudra/pkg/gpu"
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
	// AdminInstances are, by GPU UUID, the MIG instances that no claim
	// accounts for: an admin's. They are left alone.
	AdminInstances map[string][]gpu.MigInstance
}

// Reconcile brings the node in line with the checkpoint at start-up, before
// the plugin serves the kubelet: half-prepared claims are rolled back,
// prepared claims get their CDI specs back (a reboot empties /var/run/cdi),
// and specs of claims that are not prepared are removed so that no container
// can be started with a device it no longer owns.
//
// Each claim is handled under its claim lock and from its entry as it is
// then, so that a Prepare or Unprepare that runs alongside (a plugin that
// serves early, a test) is never undone half-way.
func (s *State) Reconcile(ctx context.Context) (ReconcileReport, error) {
	logger := klog.FromContext(ctx)
	var report ReconcileReport
	var errs []error

	s.mu.Lock()
	report.Rebooted = s.cp.BootID != "" && s.cp.BootID != s.opts.BootID
	uids := slices.Sorted(maps.Keys(s.cp.Claims))
	s.mu.Unlock()

	for _, uid := range uids {
		rewritten, rolledBack, err := s.reconcileClaim(ctx, uid)
		if err != nil {
			errs = append(errs, err)
		}
		if rewritten {
			report.Rewritten = append(report.Rewritten, uid)
		}
		if rolledBack {
			report.RolledBack = append(report.RolledBack, uid)
		}
	}

	specs, err := s.opts.CDI.ListClaimUIDs()
	if err != nil {
		errs = append(errs, fmt.Errorf("list CDI specs: %w", err))
	}
	for _, uid := range specs {
		removed, err := s.removeStaleSpec(uid)
		if err != nil {
			errs = append(errs, fmt.Errorf("remove stale CDI spec: %w", err))
		}
		if removed {
			report.RemovedStale = append(report.RemovedStale, uid)
		}
	}

	admin, err := s.AdminInstances()
	if err != nil {
		errs = append(errs, fmt.Errorf("list MIG instances: %w", err))
	}
	report.AdminInstances = admin
	for _, uuid := range slices.Sorted(maps.Keys(admin)) {
		for _, inst := range admin[uuid] {
			logger.Info("Found a MIG instance gpudra did not create; leaving it alone and not publishing its placement or its GPU",
				"gpu", uuid, "gpuInstance", inst.GIID, "profileID", inst.ProfileID, "placementStart", inst.Placement.Start, "placementSize", inst.Placement.Size)
		}
	}

	// Record the current boot ID so the next start can tell a reboot.
	s.mu.Lock()
	if err := s.saveLocked(); err != nil {
		errs = append(errs, err)
	}
	prepared := len(s.cp.Claims)
	s.mu.Unlock()

	logger.Info("Reconciled node state with checkpoint",
		"rebooted", report.Rebooted, "prepared", prepared,
		"rolledBack", len(report.RolledBack), "rewrittenSpecs", len(report.Rewritten), "removedStaleSpecs", len(report.RemovedStale))
	return report, errors.Join(errs...)
}

// reconcileClaim rewrites the missing spec of a prepared claim or rolls back
// a half-prepared one.
func (s *State) reconcileClaim(ctx context.Context, uid string) (rewritten, rolledBack bool, err error) {
	unlock := s.claimLocks.lock(uid)
	defer unlock()
	s.mu.Lock()
	c, ok := s.cp.Claims[uid]
	s.mu.Unlock()
	if !ok {
		return false, false, nil
	}
	ref := ClaimRef{UID: c.UID, Namespace: c.Namespace, Name: c.Name}
	if c.State == checkpoint.PrepareCompleted {
		rewritten, err := s.ensurePrepared(ctx, &c)
		if err != nil {
			return false, false, fmt.Errorf("%s: %w", ref, err)
		}
		return rewritten, false, nil
	}
	// PrepareStarted (or a state this version does not know): the
	// prepare never finished, so no container can be using the devices.
	// Undo and let the kubelet retry.
	if err := s.rollback(ctx, ref); err != nil {
		return false, false, fmt.Errorf("%s: roll back unfinished prepare: %w", ref, err)
	}
	return false, true, nil
}

// removeStaleSpec removes the spec of a claim the checkpoint does not hold.
func (s *State) removeStaleSpec(uid string) (bool, error) {
	unlock := s.claimLocks.lock(uid)
	defer unlock()
	s.mu.Lock()
	_, known := s.cp.Claims[uid]
	s.mu.Unlock()
	if known {
		return false, nil
	}
	if err := s.opts.CDI.RemoveClaimSpec(uid); err != nil {
		return false, err
	}
	return true, nil
}
