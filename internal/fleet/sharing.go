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

package fleet

import (
	"cmp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// The values of the sharing label of the device metrics. A fixed set, so
// the label adds at most a handful of series per device group.
const (
	// SharingExclusive and SharingShareable say how a published device may
	// be allocated: to one claim, or (allowMultipleAllocations, consumable
	// capacity) to several at once.
	SharingExclusive = "exclusive"
	SharingShareable = "shareable"

	// SharingMPS and SharingTimeSlicing are allocated devices whose
	// effective config of this driver (the DeviceClass's and the claim's,
	// merged as the kubelet plugin merges them) asks for that strategy.
	SharingMPS         = string(configapi.MPSStrategy)
	SharingTimeSlicing = string(configapi.TimeSlicingStrategy)
	// SharingShare is a share smaller than the whole GPU of a shareable
	// device, whose config asks for no strategy: the node pool's default
	// (the kubelet plugin's --consumable-capacity-sharing) applies, which
	// the controller does not know.
	SharingShare = "share"
	// SharingNone is an allocated device used without sharing: no
	// strategy asked for, and not a share smaller than the GPU.
	SharingNone = "none"
	// SharingInvalid is an allocated device whose configs of this driver
	// do not decode or do not fit it (the webhook rejects such configs;
	// the plugin would fail the prepare).
	SharingInvalid = "invalid"
)

// AllocatedSharing lists the sharing values of allocated devices, the
// strongest first. A shareable device that several claims hold counts
// once, under the strongest value among them: MPS switches the whole GPU
// to exclusive-process compute mode and the time slice is one setting per
// GPU, so the strongest is the one that governs the device.
var AllocatedSharing = []string{SharingMPS, SharingTimeSlicing, SharingShare, SharingNone, SharingInvalid}

// stronger reports whether sharing value a takes precedence over b.
func stronger(a, b string) bool {
	return slices.Index(AllocatedSharing, a) < slices.Index(AllocatedSharing, b)
}

// allocationSharing returns, for the devices of the inventory in some
// claim's allocation (admin access aside, as in allocatedDevices), the
// sharing value each is counted under. Devices held without sharing, most
// of a fleet, are left out: absent means SharingNone.
func allocationSharing(driver string, claims []*resourceapi.ResourceClaim, inv inventory) map[DeviceID]string {
	r := sharingReader{driver: driver, decoded: map[string]string{}}
	out := map[DeviceID]string{}
	for _, c := range claims {
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		for _, result := range a.Devices.Results {
			if result.Driver != driver || (result.AdminAccess != nil && *result.AdminAccess) {
				continue
			}
			id := DeviceID{Pool: result.Pool, Device: result.Device}
			d, ok := inv.lookup(id)
			if !ok {
				continue
			}
			mode := r.mode(a, result, d)
			prev, seen := out[id]
			if (seen && stronger(mode, prev)) || (!seen && mode != SharingNone) {
				out[id] = mode
			}
		}
	}
	return out
}

// sharingReader decodes configs with the package the kubelet plugin uses,
// once per distinct set of configs: claims from one template carry the
// same parameters.
type sharingReader struct {
	driver string
	// decoded holds the strategy ("" for none, SharingInvalid) by the
	// configs' parameters and the device's kind.
	decoded map[string]string
}

// mode is the sharing value of one allocated device.
func (r *sharingReader) mode(a *resourceapi.AllocationResult, result resourceapi.DeviceRequestAllocationResult, d *Device) string {
	strategy := ""
	if len(a.Devices.Config) > 0 {
		strategy = r.strategy(resourceclaim.ConfigForResult(a.Devices.Config, result), d.Type == slicebuilder.TypeMIG)
	}
	switch {
	case strategy != "":
		return strategy
	case partialShare(result, d):
		return SharingShare
	}
	return SharingNone
}

// strategy decodes the configs of this driver that apply to a device as
// the plugin's prepare does: each on its own, then merged, the
// DeviceClass's under the claim's (configapi.ForDevice).
func (r *sharingReader) strategy(applicable []resourceapi.DeviceAllocationConfiguration, mig bool) string {
	// The API promises no order between class and claim configs.
	slices.SortStableFunc(applicable, func(x, y resourceapi.DeviceAllocationConfiguration) int {
		return cmp.Compare(sourceRank(x.Source), sourceRank(y.Source))
	})
	var layers [][]byte
	var key strings.Builder
	if mig {
		key.WriteString("mig")
	}
	for _, c := range applicable {
		if c.Opaque != nil && c.Opaque.Driver == r.driver {
			layers = append(layers, c.Opaque.Parameters.Raw)
			key.WriteByte(0)
			key.Write(c.Opaque.Parameters.Raw)
		}
	}
	if len(layers) == 0 {
		return ""
	}
	if s, ok := r.decoded[key.String()]; ok {
		return s
	}
	s := decodeStrategy(layers, mig)
	r.decoded[key.String()] = s
	return s
}

// sourceRank orders configs by precedence, lowest first: the DeviceClass's
// are defaults that the claim's own override.
func sourceRank(source resourceapi.AllocationConfigSource) int {
	if source == resourceapi.AllocationConfigSourceClass {
		return 0
	}
	return 1
}

func decodeStrategy(layers [][]byte, mig bool) string {
	for _, l := range layers {
		if _, err := configapi.Decode(l); err != nil {
			return SharingInvalid
		}
	}
	cfg, err := configapi.ForDevice(layers, mig)
	if err != nil {
		return SharingInvalid
	}
	var sh *configapi.Sharing
	switch c := cfg.(type) {
	case *configapi.GpuConfig:
		sh = c.Sharing
	case *configapi.MigConfig:
		sh = c.Sharing
	}
	switch {
	case sh.IsMPS():
		return SharingMPS
	case sh.IsTimeSlicing():
		return SharingTimeSlicing
	}
	return ""
}

// partialShare reports whether a whole GPU was allocated as a share
// smaller than the GPU, as the kubelet plugin decides which claims the
// node pool's default sharing applies to: a share of all the memory is
// the whole GPU, used alone.
func partialShare(result resourceapi.DeviceRequestAllocationResult, d *Device) bool {
	if result.ShareID == nil || d.Type != slicebuilder.TypeGPU {
		return false
	}
	mem, ok := result.ConsumedCapacity[slicebuilder.CapMemory]
	return ok && (d.MemoryBytes == 0 || mem.Value() < d.MemoryBytes)
}
