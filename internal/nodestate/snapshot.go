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
	"cmp"
	"slices"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// Claims returns a copy of every claim recorded, completed or not, sorted
// by UID: what the plugin's metrics label devices with.
func (s *State) Claims() []checkpoint.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]checkpoint.Claim, 0, len(s.cp.Claims))
	for _, c := range s.cp.Claims {
		out = append(out, c.Clone())
	}
	slices.SortFunc(out, func(a, b checkpoint.Claim) int { return cmp.Compare(a.UID, b.UID) })
	return out
}

// Claim returns a copy of one recorded claim.
func (s *State) Claim(uid string) (checkpoint.Claim, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cp.Claims[uid]
	if !ok {
		return checkpoint.Claim{}, false
	}
	return c.Clone(), true
}
