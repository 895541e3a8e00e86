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
	"slices"
)

// Published MIG placements. The scheduler may allocate a published MIG
// placement to a claim long before the claim reaches the node, and once
// the placement is gone from the slices its claim no longer counts against
// its GPU's counters: the GPU could be given whole to another claim, which
// the node must then refuse. So the plugin records a GPU here before it
// publishes the GPU's placements, and the record outlives restarts,
// reboots and wipes of the node's ResourceSlices (checkpoint.MigPublished).

// MigPublished returns the GPUs (by UUID) recorded as having published
// their MIG placements.
func (s *State) MigPublished() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.cp.MigPublished))
	for _, uuid := range s.cp.MigPublished {
		out[uuid] = true
	}
	return out
}

// RecordMigPublished adds the GPUs add to those recorded as having
// published their MIG placements and takes the GPUs remove out, and
// returns once that is on disk; on error the record is as it was. A GPU in
// both is added. Nothing is written when nothing changes.
//
// The caller must record a GPU before it publishes the GPU's placements,
// and may take it out only once no claim can hold one of them. Changes
// must be serialized by the caller (the plugin's publishes are): the undo
// of a failed write puts back the whole list.
func (s *State) RecordMigPublished(add, remove []string) error {
	s.mu.Lock()
	prev := s.cp.MigPublished
	next := slices.DeleteFunc(slices.Clone(prev), func(u string) bool {
		return slices.Contains(remove, u) && !slices.Contains(add, u)
	})
	for _, u := range add {
		if !slices.Contains(next, u) {
			next = append(next, u)
		}
	}
	slices.Sort(next)
	if slices.Equal(next, prev) {
		s.mu.Unlock()
		return nil
	}
	if len(next) == 0 {
		next = nil
	}
	s.cp.MigPublished = next
	gen := s.changedLocked(func() { s.cp.MigPublished = prev })
	s.mu.Unlock()
	return s.commit(gen)
}
