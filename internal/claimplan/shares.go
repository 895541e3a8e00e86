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
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Several shares of one GPU in one claim.
//
// With consumable capacity the allocator may satisfy two requests of one
// claim with two shares of the same GPU, each with its own share ID
// (KEP-5075 allows it). A container cannot be given a GPU twice, and the
// claim's containers all see every device of the claim anyway, so such
// shares become one device: the GPU once, for all of the requests, with
// the sum of the shares as its capacity (and so as its MPS limits). Shares
// of one GPU must agree on how it is configured: different configs for
// them could not both be applied to the one device.

// mergeShares returns the planned devices with the shares of each GPU
// combined into one, in the order the first share of each came.
func mergeShares(planned []Device) ([]Device, error) {
	var out []Device
	first := map[string]int{} // device name → index in out, for shares
	for _, p := range planned {
		if p.Result.ShareID == nil || p.Admin() {
			out = append(out, p)
			continue
		}
		i, seen := first[p.Result.Device]
		if !seen {
			first[p.Result.Device] = len(out)
			out = append(out, p)
			continue
		}
		merged := &out[i]
		if why := differentConfigs(*merged, p); why != "" {
			return nil, &Refusal{Kind: SharesDiffer, Request: p.Result.Request, Device: p.Result.Device, Config: p.ConfigAt,
				Msg: fmt.Sprintf("requests %s and %q were given two shares of device %s, which the claim's containers get as one device, but %s: give both requests the same config, or ask for one share of their sum",
					quoted(merged.Requests), p.Result.Request, p.Result.Device, why)}
		}
		merged.Requests = append(merged.Requests, p.Result.Request)
		merged.Consumed = addCapacity(merged.Consumed, p.Consumed)
	}
	return out, nil
}

// differentConfigs says how the configs of two shares of one device
// differ, or "" when they are the same.
func differentConfigs(a, b Device) string {
	ja, erra := json.Marshal(a.Config)
	jb, errb := json.Marshal(b.Config)
	if erra != nil || errb != nil || string(ja) != string(jb) {
		return fmt.Sprintf("their configs differ (%s and %s)", ja, jb)
	}
	return ""
}

// addCapacity returns the sum of two consumed capacities, as a new map.
func addCapacity(a, b map[resourceapi.QualifiedName]resource.Quantity) map[resourceapi.QualifiedName]resource.Quantity {
	out := make(map[resourceapi.QualifiedName]resource.Quantity, len(a)+len(b))
	for _, name := range slices.Sorted(maps.Keys(a)) {
		out[name] = a[name].DeepCopy()
	}
	for name, q := range b {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	return out
}

// quoted lists names as "a", "b".
func quoted(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote(n)
	}
	return strings.Join(out, ", ")
}

// minShareMemory is the smallest memory share the slice builder's request
// policy allows (1 MiB, in steps of 1 MiB).
const minShareMemory = 1 << 20

// staleShare ends the refusals of shares the scheduler never hands out.
const staleShare = "; the allocation is stale or not the scheduler's, so nothing was prepared"

// checkShares refuses shares that this node could not have handed out:
// the scheduler never allocates them, but a stale, hand-written or buggy
// allocation must get a clear refusal, never an over-subscribed GPU. A
// share is of a whole GPU of a node that publishes its GPUs as shareable
// (Options.SharesPublished), takes at least the smallest memory share,
// and no more memory or multiprocessors than the GPU has. Whether it fits
// beside the other claims' shares is OverSubscribed's.
func checkShares(opts Options, planned []Device) error {
	for _, p := range planned {
		// The shared IMEX channel 0 is allocated in shares too; it has
		// no capacity to check.
		if p.Result.ShareID == nil || p.Admin() || p.Channel != nil {
			continue
		}
		r := &Refusal{Kind: InvalidShare, Request: p.Result.Request, Device: p.Result.Device}
		where := fmt.Sprintf("request %q: device %s was allocated as a share (share ID %s)", p.Result.Request, p.Result.Device, *p.Result.ShareID)
		mem, ok := p.Consumed[CapacityMemory]
		sms, hasSMs := p.Consumed[CapacityMultiprocessors]
		switch {
		case !opts.SharesPublished:
			r.Msg = where + ", but this node publishes its GPUs exclusive, one claim each (consumable capacity is off, or the cluster does not serve it)"
		case p.Mig != nil:
			r.Msg = where + ", but MIG partitions are never shared"
		case !ok:
			r.Msg = where + " without a share of its memory"
		case mem.Value() < minShareMemory:
			r.Msg = fmt.Sprintf("%s of %s of memory, below the smallest share of 1Mi", where, mem.String())
		case uint64(mem.Value()) > p.GPU.MemoryBytes:
			r.Msg = fmt.Sprintf("%s of %s of memory, more than the GPU's %d bytes", where, mem.String(), p.GPU.MemoryBytes)
		case hasSMs && (sms.Value() < 0 || sms.Value() > int64(p.GPU.Multiprocessors)):
			r.Msg = fmt.Sprintf("%s of %s multiprocessors, but the GPU has %d", where, sms.String(), p.GPU.Multiprocessors)
		default:
			continue
		}
		r.Msg += staleShare
		return r
	}
	return nil
}

// Share is what a planned share takes of its GPU: its memory in bytes and
// its multiprocessors (zero for a device allocated whole).
func (d Device) Share() (memory, multiprocessors int64) {
	if d.Result.ShareID == nil {
		return 0, 0
	}
	mem := d.Consumed[CapacityMemory]
	sms := d.Consumed[CapacityMultiprocessors]
	return mem.Value(), sms.Value()
}

// OverSubscribed says why the planned share p does not fit in its GPU
// beside the shares other claims hold of it (heldMemory bytes and
// heldMultiprocessors, summed over the other claims); nil when it fits or
// p is not a share. The scheduler accounts for the shares it hands out;
// this refuses a stale or hand-written one rather than over-subscribe the
// GPU.
func OverSubscribed(p Device, heldMemory, heldMultiprocessors int64) *Refusal {
	if p.Result.ShareID == nil || p.Admin() {
		return nil
	}
	mem, sms := p.Share()
	r := &Refusal{Kind: ShareOverSubscribed, Request: p.Result.Request, Device: p.Result.Device}
	switch {
	case uint64(heldMemory+mem) > p.GPU.MemoryBytes:
		r.Msg = fmt.Sprintf("request %q: a share of %d bytes of device %s's memory does not fit: other claims hold %d of its %d bytes; refusing to over-subscribe the GPU (the allocation is stale or not the scheduler's)",
			p.Result.Request, mem, p.Result.Device, heldMemory, p.GPU.MemoryBytes)
	case p.GPU.Multiprocessors > 0 && heldMultiprocessors+sms > int64(p.GPU.Multiprocessors):
		r.Msg = fmt.Sprintf("request %q: a share of %d of device %s's multiprocessors does not fit: other claims hold %d of its %d; refusing to over-subscribe the GPU (the allocation is stale or not the scheduler's)",
			p.Result.Request, sms, p.Result.Device, heldMultiprocessors, p.GPU.Multiprocessors)
	default:
		return nil
	}
	return r
}
