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
	"math"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/checkpoint"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Capacity names that consumable capacity shares a whole GPU by (the slice
// builder publishes them; a test keeps the two in step).
const (
	CapacityMemory          resourceapi.QualifiedName = "memory"
	CapacityMultiprocessors resourceapi.QualifiedName = "multiprocessors"
)

// planSharing turns the sharing section of each planned device's config
// into what the node records and sets up for it, and refuses what cannot
// work before anything is recorded:
//
//   - MPS on more than one device of a claim: a client process connects
//     to one MPS control daemon, and gpudra runs one per device;
//   - MPS on a node that runs no MPS launcher;
//   - a per-device limit keyed by something that is not the claim's MPS
//     device.
//
// The MPS limits are the config's, capped by the claim's share of the
// device's capacity (consumable capacity): with MPS, the share is
// enforced.
func planSharing(opts Options, planned []Device) error {
	var mpsDevices []string
	var mpsConfig *ConfigRef
	for i := range planned {
		p := &planned[i]
		if p.Channel != nil {
			continue // nothing of a GPU is shared through a channel
		}
		sh := sharingOf(p.Config)
		if sh == nil && partialShare(*p) {
			sh = opts.ShareSharing
		}
		switch {
		case sh.IsTimeSlicing():
			p.Sharing = &checkpoint.DeviceSharing{Strategy: checkpoint.SharingTimeSlicing, TimeSlice: sh.Interval().Level()}
		case sh.IsMPS():
			if !slices.Contains(mpsDevices, p.Result.Device) {
				mpsDevices = append(mpsDevices, p.Result.Device)
			}
			if mpsConfig == nil {
				mpsConfig = p.ConfigAt
			}
			if !opts.MPS {
				return &Refusal{Kind: MPSUnavailable, Request: p.Result.Request, Device: p.Result.Device, Config: p.ConfigAt,
					Msg: fmt.Sprintf("request %q: device %s: MPS is not available: this plugin runs no MPS daemon launcher", p.Result.Request, p.Result.Device)}
			}
			threads, pinned, err := mpsLimits(*p, sh.MPS)
			if err != nil {
				return &Refusal{Kind: MPSLimitKey, Request: p.Result.Request, Device: p.Result.Device, Config: p.ConfigAt,
					Msg: fmt.Sprintf("request %q: device %s: %v", p.Result.Request, p.Result.Device, err)}
			}
			p.Sharing = &checkpoint.DeviceSharing{
				Strategy:               checkpoint.SharingMPS,
				MPSDaemon:              p.Result.Device,
				ActiveThreadPercentage: threads,
				PinnedMemoryMiB:        pinned,
			}
		}
	}
	if len(mpsDevices) > 1 {
		r := refuse(MPSMultipleDevices, "MPS on devices %s: a claim may use MPS on one device only, because a client process connects to one MPS control daemon and gpudra runs one per device; use one claim per shared GPU",
			strings.Join(mpsDevices, ", "))
		r.Config = mpsConfig
		return r
	}
	return nil
}

// partialShare reports whether the device was allocated as a share of a
// GPU smaller than the whole: the claims that the node pool's sharing
// applies to. A share of all the memory is the whole GPU, used alone.
func partialShare(p Device) bool {
	if p.Result.ShareID == nil || p.Mig != nil {
		return false
	}
	mem, ok := p.Consumed[CapacityMemory]
	return ok && mem.Value() < int64(min(p.GPU.MemoryBytes, math.MaxInt64))
}

// mpsLimits returns the active thread percentage and the pinned memory
// limit in MiB (zero: no limit) of a claim's MPS device.
func mpsLimits(p Device, cfg *configapi.MPSConfig) (int, int64, error) {
	threads := 0
	var pinned *resource.Quantity
	if cfg != nil {
		if cfg.DefaultActiveThreadPercentage != nil {
			threads = int(*cfg.DefaultActiveThreadPercentage)
		}
		pinned = cfg.DefaultPinnedDeviceMemoryLimit
		for key, q := range cfg.PerDevicePinnedMemoryLimits {
			// The claim's one MPS device is CUDA ordinal 0 in its
			// containers.
			if key != "0" && (p.Mig != nil || key != p.GPU.UUID) {
				return 0, 0, fmt.Errorf("sharing.mps.perDevicePinnedMemoryLimits: key %q names no MPS device of this claim: its one MPS device is CUDA ordinal \"0\"%s",
					key, uuidHint(p))
			}
			q := q
			pinned = &q
		}
	}
	var pinnedMiB int64
	if pinned != nil {
		pinnedMiB = pinned.Value() >> 20
	}

	// The claim's share of the device, when it was allocated one.
	if mem, ok := p.Consumed[CapacityMemory]; ok {
		share := mem.Value() >> 20
		if share > 0 && (pinnedMiB == 0 || share < pinnedMiB) {
			pinnedMiB = share
		}
	}
	if sms, ok := p.Consumed[CapacityMultiprocessors]; ok && p.Mig == nil && p.GPU.Multiprocessors > 0 {
		if n := sms.Value(); n > 0 {
			share := int(math.Ceil(100 * float64(n) / float64(p.GPU.Multiprocessors)))
			share = min(share, 100)
			if threads == 0 || share < threads {
				threads = share
			}
		}
	}
	return threads, pinnedMiB, nil
}

func uuidHint(p Device) string {
	if p.Mig != nil {
		return ""
	}
	return " or " + p.GPU.UUID
}
