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
	"fmt"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
)

// checkShareFitsLocked refuses a share that does not fit in its GPU beside
// the shares other claims hold of it (in memory or on disk;
// claimplan.OverSubscribed). The caller holds s.mu.
func (p *preparation) checkShareFitsLocked(pd plannedDevice) error {
	s, ref := p.s, p.ref
	if pd.Result.ShareID == nil || pd.Admin() {
		return nil
	}
	type held struct{ memory, sms int64 }
	others := map[string]held{} // by claim UID: a record in memory and on disk is one
	s.heldLocked(ref.UID, func(uid string, c checkpoint.Claim) bool {
		var mem, sms int64
		for _, d := range c.Devices {
			if d.Device == pd.Result.Device && d.ShareID != "" && !d.AdminAccess {
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
	if r := claimplan.OverSubscribed(pd, usedMem, usedSMs); r != nil {
		return fmt.Errorf("%s: %w", ref, r)
	}
	return nil
}
