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
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// ReconcileReport says what Reconcile changed, for logs and tests.
type ReconcileReport struct {
	// Rebooted is true when the checkpoint was written in an earlier boot.
	Rebooted bool
	// RolledBack lists claims that were PrepareStarted: a plugin died
	// mid-prepare. Their partial work is undone; the kubelet retries.
	RolledBack []string
	// UnknownState lists claims recorded in a state this gpudra does not
	// know (written by a newer one): they are kept as they are.
	UnknownState []string
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
// can be started with a device it no longer owns. A claim in a state this
// gpudra does not know is kept as it is and reported.
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
		outcome, err := s.reconcileClaim(ctx, uid)
		if err != nil {
			errs = append(errs, err)
		}
		switch outcome {
		case claimRewritten:
			report.Rewritten = append(report.Rewritten, uid)
		case claimRolledBack:
			report.RolledBack = append(report.RolledBack, uid)
		case claimUnknownState:
			report.UnknownState = append(report.UnknownState, uid)
		}
	}

	if err := s.reconcileSharing(ctx, report.Rebooted); err != nil {
		errs = append(errs, err)
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
	gen := s.changedLocked(nil)
	prepared := len(s.cp.Claims)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		errs = append(errs, err)
	}

	logger.Info("Reconciled node state with checkpoint",
		"rebooted", report.Rebooted, "prepared", prepared,
		"rolledBack", len(report.RolledBack), "rewrittenSpecs", len(report.Rewritten), "removedStaleSpecs", len(report.RemovedStale),
		"keptInUnknownState", len(report.UnknownState))
	return report, errors.Join(errs...)
}

// claimOutcome is what reconcileClaim did with a claim.
type claimOutcome int

const (
	claimUnchanged claimOutcome = iota
	claimRewritten
	claimRolledBack
	claimUnknownState
)

// reconcileClaim rewrites the missing spec of a prepared claim, rolls back
// a half-prepared one, and keeps one in a state it does not know.
func (s *State) reconcileClaim(ctx context.Context, uid string) (claimOutcome, error) {
	unlock := s.claimLocks.lock(uid)
	defer unlock()
	s.mu.Lock()
	c, ok := s.cp.Claims[uid]
	s.mu.Unlock()
	if !ok {
		return claimUnchanged, nil
	}
	ref := ClaimRef{UID: c.UID, Namespace: c.Namespace, Name: c.Name}
	switch {
	case c.State == checkpoint.PrepareCompleted:
		rewritten, err := s.ensurePrepared(ctx, &c)
		if err != nil {
			return claimUnchanged, fmt.Errorf("%s: %w", ref, err)
		}
		if rewritten {
			return claimRewritten, nil
		}
		return claimUnchanged, nil
	case !c.State.Known():
		// A newer gpudra wrote it: whatever the state means, containers
		// may be using the devices. Rolling back would strip them; keep
		// the record (its devices stay taken) and say so.
		klog.FromContext(ctx).Error(nil, "Claim is recorded in a state this gpudra does not know (written by a newer version?); keeping it as it is: its devices stay prepared and taken until the kubelet unprepares it",
			"claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID, "state", c.State)
		return claimUnknownState, nil
	}
	// PrepareStarted or UnprepareStarted: the prepare never finished (or
	// the unprepare began), so no container can be using the devices.
	// Undo and let the kubelet retry.
	if err := s.rollback(ctx, ref); err != nil {
		return claimUnchanged, fmt.Errorf("%s: roll back unfinished prepare: %w", ref, err)
	}
	return claimRolledBack, nil
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
