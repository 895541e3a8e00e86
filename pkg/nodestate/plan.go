package nodestate

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/pkg/claimplan"
)

// plannedDevice is one allocated device of this driver, resolved against the
// inventory, with the config that applies to it and how it is shared.
type plannedDevice = claimplan.Device

// plan resolves a claim's allocation into devices of this node, with the
// checks that need no hardware (pkg/claimplan: the one decision that gpudra
// check and the admission webhook make too). It has no side effects, so a
// claim with a bad config, a device this node does not have, or devices
// that overlap each other fails before anything is recorded or created.
func (s *State) plan(ref ClaimRef, claim *resourceapi.ResourceClaim) ([]plannedDevice, error) {
	planned, err := claimplan.Plan(claimplan.Options{
		DriverName:      s.opts.DriverName,
		Node:            s.node(),
		MPS:             s.opts.MPS != nil,
		SharesPublished: s.sharesPublished(),
		ShareSharing:    s.opts.ShareSharing,
	}, claim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return planned, nil
}
