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

package slicebuilder

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// The IMEX channel pools of NVLink domains, which gpudra-controller
// publishes (internal/nvlinkpools) and the offline tools stand in for
// (internal/fakenodes), so that both build the same pool.

// DefaultChannels is how many exclusive channels (channel-1…channel-N) a
// domain's pool holds by default: 127 plus the shared channel-0 fill one
// ResourceSlice (128 devices), one slice per NVL72 partition. At one
// channel per job, that is 127 jobs at a time in one domain, more than
// the 18 trays of an NVL72 can run apart.
const DefaultChannels = 127

// MaxChannels is the most exclusive channels a pool may hold: the driver
// has 2048 IMEX channels (0…2047), and channel 0 is the shared one.
const MaxChannels = 2047

// ValidateChannels checks a channel count (the controller's
// --nvlink-channels).
func ValidateChannels(n int) error {
	if n < 1 || n > MaxChannels {
		return fmt.Errorf("%d channels per NVLink domain: want 1 to %d (the driver's IMEX channels 1…2047; channel 0 is the shared one and always published)", n, MaxChannels)
	}
	return nil
}

// ChannelPoolSelector is the node selector of a domain's pool: the nodes
// labelled with the domain whose IMEX daemon is ready. The scheduler copies it into the allocation
// of every claim that gets a channel, so that all the pods using the
// claim land in the domain.
func ChannelPoolSelector(driverName, domain string) *v1.NodeSelector {
	return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{
			Key:      NVLinkDomainLabel(driverName),
			Operator: v1.NodeSelectorOpIn,
			Values:   []string{domain},
		}, {
			Key:      IMEXReadyLabel(driverName),
			Operator: v1.NodeSelectorOpIn,
			Values:   []string{"true"},
		}},
	}}}
}

// ChannelDevices are the devices of a domain's pool: channel-0, which
// any number of claims may hold (allowMultipleAllocations), then
// channel-1…channel-n, one claim each. Each carries its type, its number
// and its domain.
func ChannelDevices(domain string, n int) []resourceapi.Device {
	devices := make([]resourceapi.Device, 0, n+1)
	for c := 0; c <= n; c++ {
		d := resourceapi.Device{
			Name: ChannelDeviceName(c),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				AttrType:         {StringValue: ptr.To(TypeIMEXChannel)},
				AttrChannel:      {IntValue: ptr.To(int64(c))},
				AttrNVLinkDomain: {StringValue: ptr.To(domain)},
			},
		}
		if c == 0 {
			d.AllowMultipleAllocations = ptr.To(true)
		}
		devices = append(devices, d)
	}
	return devices
}

// ChannelPools are the channel pools of the given domains, n exclusive channels
// each, as the ResourceSlice controller publishes them: a domain's
// devices in slices of at most resourceapi.ResourceSliceMaxDevices, in
// channel order (the allocator tries them first to last).
func ChannelPools(driverName string, domains []string, n int) *resourceslice.DriverResources {
	res := &resourceslice.DriverResources{Pools: make(map[string]resourceslice.Pool, len(domains))}
	for _, domain := range domains {
		devices := ChannelDevices(domain, n)
		var pool resourceslice.Pool
		pool.NodeSelector = ChannelPoolSelector(driverName, domain)
		for chunk := range slices.Chunk(devices, resourceapi.ResourceSliceMaxDevices) {
			pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: chunk})
		}
		res.Pools[ChannelPoolName(domain)] = pool
	}
	return res
}
