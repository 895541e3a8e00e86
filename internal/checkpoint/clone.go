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

package checkpoint

import (
	"encoding/json"
	"maps"
	"slices"
)

// Clone returns a deep copy of cp: a snapshot that later changes to cp do
// not reach, so it can be written while cp keeps changing.
func (cp *Checkpoint) Clone() *Checkpoint {
	out := *cp
	out.MigModeEnabled = slices.Clone(cp.MigModeEnabled)
	out.MigPublished = slices.Clone(cp.MigPublished)
	out.TimeSlices = maps.Clone(cp.TimeSlices)
	out.ComputeModes = maps.Clone(cp.ComputeModes)
	if cp.MPSDaemons != nil {
		out.MPSDaemons = make(map[string]MPSDaemon, len(cp.MPSDaemons))
		for id, d := range cp.MPSDaemons {
			out.MPSDaemons[id] = d.Clone()
		}
	}
	out.Claims = make(map[string]Claim, len(cp.Claims))
	for uid, c := range cp.Claims {
		out.Claims[uid] = c.Clone()
	}
	return &out
}

// Clone returns a deep copy of c.
func (c Claim) Clone() Claim {
	out := c
	if c.Devices != nil {
		out.Devices = make([]Device, len(c.Devices))
		for i, d := range c.Devices {
			out.Devices[i] = d.clone()
		}
	}
	return out
}

func (d Device) clone() Device {
	out := d
	out.Requests = slices.Clone(d.Requests)
	out.CDIDeviceIDs = slices.Clone(d.CDIDeviceIDs)
	out.Env = slices.Clone(d.Env)
	out.Config = json.RawMessage(slices.Clone([]byte(d.Config)))
	if d.Mig != nil {
		m := *d.Mig
		m.GPUInstanceID = clonePtr(d.Mig.GPUInstanceID)
		m.ComputeInstanceID = clonePtr(d.Mig.ComputeInstanceID)
		out.Mig = &m
	}
	if d.Channel != nil {
		ch := *d.Channel
		out.Channel = &ch
	}
	if d.Sharing != nil {
		sh := *d.Sharing
		out.Sharing = &sh
	}
	return out
}

// Clone returns a deep copy of d.
func (d MPSDaemon) Clone() MPSDaemon {
	out := d
	out.PreviousComputeMode = clonePtr(d.PreviousComputeMode)
	return out
}

func clonePtr(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
