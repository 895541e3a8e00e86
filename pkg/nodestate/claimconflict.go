package nodestate

import (
	"fmt"
)

// checkWithinClaim refuses an allocation whose own devices overlap: one
// device twice, a whole GPU beside one of its partitions, or two
// partitions sharing a memory slice. The scheduler never allocates that,
// but a stale or hand-written allocation can say anything, and preparing
// it would hand out a GPU whole while MIG mode is switched on under it (or
// fail half-way, depending on the order of the devices). It runs before
// anything is recorded or created.
//
// Devices allocated with admin access are exempt (monitoring shares a
// device by design), and so is one device allocated twice as two
// distinct shares (consumable capacity gives each share its ShareID).
func checkWithinClaim(ref ClaimRef, planned []plannedDevice) error {
	for i, a := range planned {
		if isAdmin(a.result) {
			continue
		}
		for _, b := range planned[:i] {
			if isAdmin(b.result) {
				continue
			}
			if why := conflictWithin(a, b); why != "" {
				return fmt.Errorf("%s: %s; the allocation is inconsistent (stale, or not the scheduler's), so nothing was prepared", ref, why)
			}
		}
	}
	return nil
}

// conflictWithin says how two devices of one claim overlap, or "" when
// they do not.
func conflictWithin(a, b plannedDevice) string {
	ra, rb := a.result, b.result
	if ra.Device == rb.Device {
		if ra.ShareID != nil && rb.ShareID != nil && *ra.ShareID != *rb.ShareID {
			return ""
		}
		return fmt.Sprintf("device %q is allocated twice, to request %q and to request %q", ra.Device, rb.Request, ra.Request)
	}
	if a.gpu.UUID != b.gpu.UUID {
		return ""
	}
	switch {
	case a.mig != nil && b.mig == nil:
		return fmt.Sprintf("device %q (request %q) is a partition of device %q (request %q), which the claim also gets whole", ra.Device, ra.Request, rb.Device, rb.Request)
	case a.mig == nil && b.mig != nil:
		return fmt.Sprintf("device %q (request %q) is a partition of device %q (request %q), which the claim also gets whole", rb.Device, rb.Request, ra.Device, ra.Request)
	case a.mig != nil && b.mig != nil && a.mig.Placement.Overlaps(b.mig.Placement):
		return fmt.Sprintf("devices %q (request %q) and %q (request %q) overlap: both use memory slices of GPU %s (%d-%d and %d-%d)",
			rb.Device, rb.Request, ra.Device, ra.Request, a.gpu.DeviceName(),
			b.mig.Placement.Start, b.mig.Placement.Start+b.mig.Placement.Size-1,
			a.mig.Placement.Start, a.mig.Placement.Start+a.mig.Placement.Size-1)
	}
	return ""
}
