package nodestate

import (
	"fmt"

	"github.com/gpudra/gpudra/pkg/checkpoint"
	"github.com/gpudra/gpudra/pkg/claimplan"
)

// checkShareFitsLocked refuses a share that does not fit in its GPU beside
// the shares other claims hold of it (in memory or on disk;
// claimplan.OverSubscribed). The caller holds s.mu.
func (s *State) checkShareFitsLocked(ref ClaimRef, p plannedDevice) error {
	if p.Result.ShareID == nil || p.Admin() {
		return nil
	}
	type held struct{ memory, sms int64 }
	others := map[string]held{} // by claim UID: a record in memory and on disk is one
	s.heldLocked(ref.UID, func(uid string, c checkpoint.Claim) bool {
		var mem, sms int64
		for _, d := range c.Devices {
			if d.Device == p.Result.Device && d.ShareID != "" && !d.AdminAccess {
				mem += d.ShareMemoryBytes
				sms += d.ShareMultiprocessors
			}
		}
		h := others[uid]
		others[uid] = held{max(h.memory, mem), max(h.sms, sms)}
		return false
	})
	var usedMem, usedSMs int64
	for _, h := range others {
		usedMem += h.memory
		usedSMs += h.sms
	}
	if r := claimplan.OverSubscribed(p, usedMem, usedSMs); r != nil {
		return fmt.Errorf("%s: %w", ref, r)
	}
	return nil
}
