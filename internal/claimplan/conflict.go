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

package claimplan

import (
	"fmt"
	"strconv"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// checkWithinClaim refuses an allocation whose own devices overlap: one
// device twice, a whole GPU beside one of its partitions, or two
// partitions sharing a memory slice. The scheduler never allocates that,
// but a stale or hand-written allocation can say anything, and preparing
// it would hand out a GPU whole while MIG mode is switched on under it (or
// fail half-way, depending on the order of the devices).
//
// Devices allocated with admin access are exempt (monitoring shares a
// device by design), and so is one device allocated twice as two
// distinct shares (consumable capacity gives each share its ShareID).
func checkWithinClaim(planned []Device) error {
	for i, a := range planned {
		if a.Admin() {
			continue
		}
		for _, b := range planned[:i] {
			if b.Admin() {
				continue
			}
			if why := conflictWithin(a, b); why != "" {
				return &Refusal{Kind: OverlapWithinClaim, Request: a.Result.Request, Device: a.Result.Device,
					Msg: why + "; the allocation is inconsistent (stale, or not the scheduler's), so nothing was prepared"}
			}
		}
	}
	return nil
}

// conflictWithin says how two devices of one claim overlap, or "" when
// they do not.
func conflictWithin(a, b Device) string {
	ra, rb := a.Result, b.Result
	if ra.Device == rb.Device {
		if ra.ShareID != nil && rb.ShareID != nil && *ra.ShareID != *rb.ShareID {
			return ""
		}
		return fmt.Sprintf("device %q is allocated twice, to request %q and to request %q", ra.Device, rb.Request, ra.Request)
	}
	if a.GPU.UUID != b.GPU.UUID || a.Channel != nil || b.Channel != nil {
		return ""
	}
	switch {
	case a.Mig != nil && b.Mig == nil:
		return fmt.Sprintf("device %q (request %q) is a partition of device %q (request %q), which the claim also gets whole", ra.Device, ra.Request, rb.Device, rb.Request)
	case a.Mig == nil && b.Mig != nil:
		return fmt.Sprintf("device %q (request %q) is a partition of device %q (request %q), which the claim also gets whole", rb.Device, rb.Request, ra.Device, ra.Request)
	case a.Mig != nil && b.Mig != nil && a.Mig.Placement.Overlaps(b.Mig.Placement):
		return fmt.Sprintf("devices %q (request %q) and %q (request %q) overlap: both use memory slices of GPU %s (%d-%d and %d-%d)",
			rb.Device, rb.Request, ra.Device, ra.Request, a.GPU.DeviceName(),
			b.Mig.Placement.Start, b.Mig.Placement.Start+b.Mig.Placement.Size-1,
			a.Mig.Placement.Start, a.Mig.Placement.Start+a.Mig.Placement.Size-1)
	}
	return ""
}

// HeldConflict says why the planned device p cannot be prepared while
// another claim, named other ("ResourceClaim default/a (UID …)"), holds
// the device held; nil when it can. Two devices conflict when they are
// the same device, or share a GPU and either is the whole GPU or their
// MIG placements overlap; two shares of one device (consumable capacity)
// do not, but must agree on how the device is shared. Devices allocated
// with admin access never conflict (monitoring).
//
// The scheduler never allocates a device twice, but a stale allocation or
// a bug must not leak one tenant's GPU to another: this is the node's last
// line of defence.
func HeldConflict(p Device, held checkpoint.Device, other string) *Refusal {
	if p.Admin() || held.AdminAccess || !overlaps(p, held) {
		return nil
	}
	r := &Refusal{Request: p.Result.Request, Device: p.Result.Device, Config: p.ConfigAt, Other: other}
	if sharedDevice(p, held) {
		why := sharingConflict(p, held)
		if why == "" {
			return nil
		}
		r.Kind = SharingConflict
		r.Msg = fmt.Sprintf("request %q: device %s is shared with %s, and %s", p.Result.Request, p.Result.Device, other, why)
		return r
	}
	r.Kind = HeldByOther
	r.Msg = fmt.Sprintf("request %q: device %s is already prepared for %s; refusing to give one GPU to two claims", p.Result.Request, p.Result.Device, other)
	return r
}

// sharedDevice reports whether both are shares of one device that allows
// multiple allocations: the scheduler gives each share an ID.
func sharedDevice(p Device, d checkpoint.Device) bool {
	return p.Result.ShareID != nil && d.ShareID != "" && d.Device == p.Result.Device
}

func overlaps(p Device, d checkpoint.Device) bool {
	if p.Channel != nil || d.Channel != nil {
		// A channel is no GPU: it overlaps only itself.
		return d.Pool == p.Result.Pool && d.Device == p.Result.Device
	}
	if d.Device == p.Result.Device {
		return true
	}
	if d.GPUUUID != p.GPU.UUID {
		return false
	}
	if p.Mig == nil || d.Mig == nil {
		return true
	}
	return p.Mig.Placement.Overlaps(gpu.MigPlacement{Start: d.Mig.PlacementStart, Size: d.Mig.PlacementSize})
}

// sharingConflict says why a device another claim holds cannot be shared
// with the planned one, or "" when it can: MPS puts the GPU in
// exclusive-process compute mode, which locks out clients that do not go
// through the daemon, and the time slice is one setting per GPU.
func sharingConflict(p Device, other checkpoint.Device) string {
	mine, theirs := p.Sharing, other.Sharing
	isMPS := func(s *checkpoint.DeviceSharing) bool { return s != nil && s.Strategy == checkpoint.SharingMPS }
	switch {
	case isMPS(mine) && !isMPS(theirs):
		return "it uses the device without MPS, which MPS would lock out (compute mode exclusive-process)"
	case !isMPS(mine) && isMPS(theirs):
		return "it shares the device through MPS, so every claim on it must use MPS too (sharing.strategy: MPS)"
	case mine != nil && theirs != nil && mine.Strategy == checkpoint.SharingTimeSlicing && theirs.Strategy == checkpoint.SharingTimeSlicing &&
		mine.TimeSlice != theirs.TimeSlice:
		return fmt.Sprintf("it set the GPU's time-slice interval to %s, and this claim asks for %s; claims sharing a GPU must ask for the same interval",
			IntervalName(theirs.TimeSlice), IntervalName(mine.TimeSlice))
	}
	return ""
}

// IntervalName names a time-slice level as the config spells it.
func IntervalName(level int) string {
	if level >= 0 && level < len(configapi.SupportedTimeSliceIntervals) {
		return configapi.SupportedTimeSliceIntervals[level]
	}
	return strconv.Itoa(level)
}
