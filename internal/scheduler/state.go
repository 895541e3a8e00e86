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

package scheduler

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// State is what allocated claims hold, as the scheduler tracks it: whole
// devices, shares of devices that allow multiple allocations, and the
// capacity consumed from them; and, for messages, which claim holds what.
type State struct {
	devices  sets.Set[structured.DeviceID]
	shared   sets.Set[structured.SharedDeviceID]
	capacity structured.ConsumedCapacityCollection
	holders  map[structured.DeviceID][]string
}

// NewState is a cluster where nothing is allocated.
func NewState() *State {
	return &State{
		devices:  sets.New[structured.DeviceID](),
		shared:   sets.New[structured.SharedDeviceID](),
		capacity: structured.NewConsumedCapacityCollection(),
		holders:  map[structured.DeviceID][]string{},
	}
}

// StateOf is what the given claims hold (those with an allocation).
func StateOf(claims []*resourceapi.ResourceClaim) *State {
	s := NewState()
	for _, c := range claims {
		if c.Status.Allocation != nil {
			s.Add(c.Namespace+"/"+c.Name, c.Status.Allocation)
		}
	}
	return s
}

// Add records an allocation, made for the claim named holder. Devices
// allocated with admin access are not held: they stay available.
func (s *State) Add(holder string, alloc *resourceapi.AllocationResult) {
	for _, d := range alloc.Devices.Results {
		if d.AdminAccess != nil && *d.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID != nil {
			s.shared.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
			if d.ConsumedCapacity != nil {
				s.capacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
			}
		} else {
			s.devices.Insert(id)
		}
		s.holders[id] = append(s.holders[id], holder)
	}
}

// Holders returns the claims that hold a device: one, or those holding a
// share of a device that allows multiple allocations.
func (s *State) Holders(id structured.DeviceID) []string {
	return s.holders[id]
}

// Consumed returns the capacity claims consume of a device that allows
// multiple allocations (nil when none), as a copy.
func (s *State) Consumed(id structured.DeviceID) map[resourceapi.QualifiedName]resource.Quantity {
	c, ok := s.capacity[id]
	if !ok {
		return nil
	}
	out := make(map[resourceapi.QualifiedName]resource.Quantity, len(c))
	for name, q := range c {
		if q != nil {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// Clone returns an independent copy.
func (s *State) Clone() *State {
	c := &State{devices: s.devices.Clone(), shared: s.shared.Clone(), capacity: s.capacity.Clone(), holders: make(map[structured.DeviceID][]string, len(s.holders))}
	for k, v := range s.holders {
		c.holders[k] = append([]string(nil), v...)
	}
	return c
}

// allocated is the allocator's view, a copy it may not change ours through.
func (s *State) allocated() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         s.devices.Clone(),
		AllocatedSharedDeviceIDs: s.shared.Clone(),
		AggregatedCapacity:       s.capacity.Clone(),
	}
}
