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

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/claimplan"
)

// plannedDevice is one allocated device of this driver, resolved against the
// inventory, with the config that applies to it and how it is shared.
type plannedDevice = claimplan.Device

// plan resolves a claim's allocation into devices of this node, with the
// checks that need no hardware (internal/claimplan: the one decision that gpudra
// check and the admission webhook make too). It has no side effects, so a
// claim with a bad config, a device this node does not have, or devices
// that overlap each other fails before anything is recorded or created.
func (p *preparation) plan(claim *resourceapi.ResourceClaim) ([]plannedDevice, error) {
	s, ref := p.s, p.ref
	planned, err := claimplan.Plan(claimplan.Options{
		DriverName:      s.opts.DriverName,
		Node:            s.opts.Node,
		MPS:             s.opts.MPS != nil,
		SharesPublished: s.opts.sharesPublished(),
		ShareSharing:    s.opts.ShareSharing,
		NVLinkDomain:    s.opts.nvlinkDomain(),
	}, claim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return planned, nil
}
