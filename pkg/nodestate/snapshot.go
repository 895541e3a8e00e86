package nodestate

import (
	"cmp"
	"slices"

	"github.com/gpudra/gpudra/pkg/checkpoint"
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
