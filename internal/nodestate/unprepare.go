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
	// The Writer's error already names the claim UID and the spec.
	if err := s.opts.CDI.RemoveClaimSpec(ref.UID); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	if !known {
		logger.V(4).Info("Claim not prepared on this node; nothing to unprepare")
		return nil
	}
	// The claim stays recorded, as UnprepareStarted, until its sharing is
	// torn down and its MIG devices are gone: a failure here is retried by
	// the kubelet, and a crash is finished by the next start-up (which
	// would otherwise recreate them).
	if err := s.markUnprepareStarted(ref.UID); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	if err := s.releaseSharing(ctx, ref.UID); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	if err := (migPartitions{}).destroyMigDevices(ctx, s, ref.UID); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}

	s.mu.Lock()
	devices := len(s.cp.Claims[ref.UID].Devices)
	s.mu.Unlock()
	if err := s.putClaim(ref.UID, nil); err != nil {
		return fmt.Errorf("%s: forget claim in checkpoint: %w", ref, err)
	}
	logger.V(2).Info("Unprepared claim", "devices", devices)
	return nil
}
