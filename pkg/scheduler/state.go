package scheduler

import (
	resourceapi "k8s.io/api/resource/v1"
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
	holders  map[structured.DeviceID]string
}

// NewState is a cluster where nothing is allocated.
func NewState() *State {
	return &State{
		devices:  sets.New[structured.DeviceID](),
		shared:   sets.New[structured.SharedDeviceID](),
		capacity: structured.NewConsumedCapacityCollection(),
		holders:  map[structured.DeviceID]string{},
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
		s.holders[id] = holder
	}
}

// Holder returns the claim that holds a device (or a share of it).
func (s *State) Holder(id structured.DeviceID) (string, bool) {
	h, ok := s.holders[id]
	return h, ok
}

// Clone returns an independent copy.
func (s *State) Clone() *State {
	c := &State{devices: s.devices.Clone(), shared: s.shared.Clone(), capacity: s.capacity.Clone(), holders: make(map[structured.DeviceID]string, len(s.holders))}
	for k, v := range s.holders {
		c.holders[k] = v
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
