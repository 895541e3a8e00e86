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

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// EnsureSpecs rewrites the CDI spec of every prepared claim whose spec is
// missing, and returns their UIDs. The container runtime reads a claim's
// spec each time it creates a container with the claim's devices, and a
// running pod's container can be restarted at any time: a spec that an
// admin or a cleanup job deleted would make that restart fail. Reconcile
// does the same at start-up; the plugin calls this periodically.
func (s *State) EnsureSpecs(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	uids := slices.Sorted(maps.Keys(s.cp.Claims))
	s.mu.Unlock()
	var rewritten []string
	var errs []error
	for _, uid := range uids {
		ok, err := s.ensureSpecOf(ctx, uid)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			rewritten = append(rewritten, uid)
		}
	}
	return rewritten, errors.Join(errs...)
}

// ensureSpecOf rewrites the claim's spec if it is prepared and its spec is
// missing, under the claim's lock.
func (s *State) ensureSpecOf(ctx context.Context, uid string) (bool, error) {
	unlock := s.claimLocks.lock(uid)
	defer unlock()
	s.mu.Lock()
	c, ok := s.cp.Claims[uid]
	s.mu.Unlock()
	if !ok || c.State != checkpoint.PrepareCompleted {
		return false, nil
	}
	rewritten, err := s.ensureSpec(ctx, c)
	if err != nil {
		return false, fmt.Errorf("%s: %w", ClaimRef{UID: c.UID, Namespace: c.Namespace, Name: c.Name}, err)
	}
	return rewritten, nil
}
