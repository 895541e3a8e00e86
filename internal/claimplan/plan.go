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
	"cmp"
	"errors"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Options say what the node is and how its plugin runs.
type Options struct {
	// DriverName is the plugin's driver: only allocation results and
	// configs for it are planned.
	DriverName string
	// Node is what the plugin published; its name is the pool.
	Node gpu.Node
	// MPS: the plugin runs MPS control daemons (it has a launcher: the
	// chart's mps.enabled). Without, a claim that asks for MPS is refused.
	MPS bool
	// SharesPublished: the node publishes its whole GPUs as shareable
	// (consumable capacity, served by the cluster): only then can an
	// allocation hold a share of one.
	SharesPublished bool
	// ShareSharing is how a claim holding a share of a GPU (less than all
	// of its memory, through consumable capacity) shares it when its
	// config does not say: the node pool's tier. Nil: not shared beyond
	// the driver's default.
	ShareSharing *configapi.Sharing
	// NVLinkDomain is the node's multi-node NVLink domain (the
	// nvlinkDomain its GPUs carry); empty when it is in none. Only the
	// channels of this domain's pool are prepared here.
	NVLinkDomain string
}

// Device is one allocated device of the driver, resolved on the node,
// with the config that applies to it and how it is shared.
type Device struct {
	Result resourceapi.DeviceRequestAllocationResult
	// Requests are the claim's requests the device is for: Result's, and
	// those of the other shares of the device merged into it (shares.go).
	Requests []string
	// Consumed is the capacity the device's shares take of it
	// (consumable capacity); empty for a device allocated whole.
	Consumed map[resourceapi.QualifiedName]resource.Quantity
	GPU      gpu.GPU
	// Mig is set for a MIG placement; GPU is then its parent.
	Mig *gpu.MigDevice
	// Channel is set for an IMEX channel of the node's NVLink domain;
	// GPU is then empty.
	Channel *gpu.IMEXChannel
	// Config is the effective config (the configs that apply, merged);
	// ConfigAt is where its last layer is written (nil without one).
	Config   configapi.Config
	ConfigAt *ConfigRef
	// Sharing is what the config's sharing section (or the pool's tier,
	// for a share) means for the device; nil when it is not shared.
	Sharing *checkpoint.DeviceSharing
}

// Admin says whether the device was allocated with admin access.
func (d Device) Admin() bool { return IsAdmin(d.Result) }

// IsAdmin says whether a result was allocated with admin access.
func IsAdmin(r resourceapi.DeviceRequestAllocationResult) bool {
	return r.AdminAccess != nil && *r.AdminAccess
}

// Held is what a claim that holds the device records of it: the fields
// that other claims' plans are checked against (HeldConflict).
func (d Device) Held() checkpoint.Device {
	requests := d.Requests
	if len(requests) == 0 {
		requests = []string{d.Result.Request}
	}
	h := checkpoint.Device{
		Requests:    slices.Clone(requests),
		Pool:        d.Result.Pool,
		Device:      d.Result.Device,
		GPUUUID:     d.GPU.UUID,
		AdminAccess: d.Admin(),
		Sharing:     d.Sharing,
	}
	if d.Result.ShareID != nil {
		h.ShareID = string(*d.Result.ShareID)
		h.ShareMemoryBytes, h.ShareMultiprocessors = d.Share()
	}
	if c := d.Channel; c != nil {
		h.Channel = &checkpoint.IMEXChannel{Domain: c.Domain, Number: c.Number}
	}
	if m := d.Mig; m != nil {
		h.Mig = &checkpoint.MigDevice{
			Profile:        m.Profile.Name,
			ProfileID:      m.Profile.ID,
			PlacementStart: m.Placement.Start,
			PlacementSize:  m.Placement.Size,
		}
	}
	return h
}

// Plan resolves a claim's allocation into devices of the node and decodes
// the opaque configs that apply to them. A claim with a bad config, a
// device this node does not have, or devices that overlap each other is
// refused (a *Refusal) before anything is recorded or created.
func Plan(opts Options, claim *resourceapi.ResourceClaim) ([]Device, error) {
	if claim.Status.Allocation == nil {
		return nil, refuse(NotAllocated, "the claim is not allocated")
	}
	alloc := claim.Status.Allocation.Devices
	node := opts.Node
	var planned []Device
	for _, result := range alloc.Results {
		if result.Driver != opts.DriverName {
			continue
		}
		at := func(r *Refusal) *Refusal { r.Request, r.Device = result.Request, result.Device; return r }
		if domain, ok := strings.CutPrefix(result.Pool, channelPoolPrefix); ok {
			ch, err := planChannel(opts, claim, result, domain)
			if err != nil {
				return nil, at(err)
			}
			planned = append(planned, ch)
			continue
		}
		if result.Pool != node.Name {
			return nil, at(refuse(ForeignPool, "request %q: device %s is in pool %q, but this node's pool is %q", result.Request, result.Device, result.Pool, node.Name))
		}
		p := Device{Result: result, Requests: []string{result.Request}, Consumed: result.ConsumedCapacity}
		if g, ok := node.GPUByDeviceName(result.Device); ok {
			p.GPU = g
		} else if md, ok := node.MigDeviceByName(result.Device); ok {
			p.GPU, p.Mig = md.Parent, &md
		} else if g, ok := node.GPUByMonitorName(result.Device); ok {
			// A monitoring device reaches a GPU whoever holds it: only
			// admin access, which only namespaces an admin labelled may
			// ask for, is entitled to it.
			if !IsAdmin(result) {
				return nil, at(refuse(MonitorWithoutAdmin, "request %q: device %s is for monitoring only: ask for it with adminAccess: true (in a namespace labelled resource.kubernetes.io/admin-access=true), or use DeviceClass %s for a GPU of your own", result.Request, result.Device, opts.DriverName))
			}
			p.GPU = g
		} else {
			return nil, at(refuse(UnknownDevice, "request %q: device %q is not a GPU on node %s, nor a MIG placement of one (it may have been removed since the claim was allocated)", result.Request, result.Device, node.Name))
		}
		cfg, where, err := configFor(opts.DriverName, claim, result, p.Mig != nil)
		if err != nil {
			return nil, err
		}
		p.Config, p.ConfigAt = cfg, where
		planned = append(planned, p)
	}
	if err := checkWithinClaim(planned); err != nil {
		return nil, err
	}
	planned, err := mergeShares(planned)
	if err != nil {
		return nil, err
	}
	if err := checkShares(opts, planned); err != nil {
		return nil, err
	}
	if err := planSharing(opts, planned); err != nil {
		return nil, err
	}
	return planned, nil
}

// configFor decodes (strictly, with defaults, validated) every opaque config
// of this driver that applies to the result, and returns the effective one:
// the configs merged field by field, those from the claim over those from
// the DeviceClass and later entries of one source over earlier ones (see
// configapi.MergeParameters). So a DeviceClass can fix a sharing tier and a
// claim still pick its driver capabilities.
//
// The scheduler happens to list class configs before claim configs, but the
// API promises no order, so the precedence is applied here rather than
// inferred from the position in the list.
func configFor(driver string, claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult, isMig bool) (configapi.Config, *ConfigRef, error) {
	applicable := resourceclaim.ConfigForResult(claim.Status.Allocation.Devices.Config, result)
	slices.SortStableFunc(applicable, func(a, b resourceapi.DeviceAllocationConfiguration) int {
		return cmp.Compare(sourceRank(a.Source), sourceRank(b.Source))
	})
	var effective *ConfigRef
	var layers [][]byte
	for _, c := range applicable {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		// Each config is checked on its own first, so that an error names
		// the config it is in.
		where := locate(claim, result, c)
		if _, err := DecodeConfig(c.Opaque.Parameters.Raw); err != nil {
			kind := InvalidConfig
			var r *Refusal
			if errors.As(err, &r) {
				kind = r.Kind
			}
			return nil, nil, &Refusal{Kind: kind, Static: true, Request: result.Request, Device: result.Device, Config: where, Err: err,
				Msg: "request " + quote(result.Request) + ": " + where.String() + ": " + err.Error()}
		}
		layers = append(layers, c.Opaque.Parameters.Raw)
		effective = where
	}
	cfg, err := configapi.ForDevice(layers, isMig)
	if err != nil {
		return nil, nil, &Refusal{Kind: ConfigKind, Request: result.Request, Device: result.Device, Config: effective, Err: err,
			Msg: "request " + quote(result.Request) + ": device " + result.Device + " (config: " + effective.String() + "): " + err.Error()}
	}
	return cfg, effective, nil
}

func quote(s string) string { return `"` + s + `"` }

// sharingOf returns the sharing section of a config, nil when it has none.
func sharingOf(cfg configapi.Config) *configapi.Sharing {
	switch c := cfg.(type) {
	case *configapi.GpuConfig:
		return c.Sharing
	case *configapi.MigConfig:
		return c.Sharing
	}
	return nil
}

// sourceRank orders configs by precedence, lowest first: the DeviceClass's
// are defaults that the claim's own override.
func sourceRank(source resourceapi.AllocationConfigSource) int {
	if source == resourceapi.AllocationConfigSourceClass {
		return 0
	}
	return 1
}

// locate says where a config came from, in the words a user would look
// for it: the claim's spec.devices.config[i].opaque (the decoder's
// messages continue with "parameters..."), or the request's DeviceClass.
func locate(claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult, c resourceapi.DeviceAllocationConfiguration) *ConfigRef {
	ref := &ConfigRef{Index: -1}
	if c.Opaque != nil {
		ref.Parameters = c.Opaque.Parameters.Raw
	}
	if c.Source == resourceapi.AllocationConfigSourceClass {
		ref.FromClass, ref.Class = true, deviceClassName(claim, result.Request)
		return ref
	}
	// The allocation copies the claim's configs but not their indices, and
	// the scheduler clears the requests of a config that covers every
	// request ("empty means all"), so the requests may differ: match on the
	// parameters, preferring an entry whose requests match too. Entries
	// with the same parameters are equally wrong, so either is a fair
	// answer.
	sameParams := func(sc resourceapi.DeviceClaimConfiguration) bool {
		return sc.Opaque != nil && c.Opaque != nil && sc.Opaque.Driver == c.Opaque.Driver &&
			string(sc.Opaque.Parameters.Raw) == string(c.Opaque.Parameters.Raw)
	}
	for i, sc := range claim.Spec.Devices.Config {
		if !sameParams(sc) {
			continue
		}
		if slices.Equal(sc.Requests, c.Requests) {
			ref.Index = i
			break
		}
		if ref.Index < 0 {
			ref.Index = i
		}
	}
	return ref
}

// deviceClassName returns the DeviceClass of a request ("name", or
// "name/subrequest" for one of its firstAvailable alternatives), or "" when
// the claim's spec does not say.
func deviceClassName(claim *resourceapi.ResourceClaim, request string) string {
	name, sub, _ := strings.Cut(request, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != name {
			continue
		}
		if sub == "" {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for _, alt := range r.FirstAvailable {
			if alt.Name == sub {
				return alt.DeviceClassName
			}
		}
	}
	return ""
}

// channelPoolPrefix starts the pools gpudra-controller publishes, one per
// NVLink domain (slicebuilder.ChannelPoolPrefix, which this layer cannot
// import; a test keeps them equal).
const channelPoolPrefix = "nvlink/"

// planChannel resolves an IMEX channel of the pool of domain: only the
// node's own domain's channels are prepared here (the pool's node
// selector already says so; this is defence in depth against a stale
// allocation or a node that changed domain), never with admin access or
// a gpudra config, which mean nothing for a channel.
func planChannel(opts Options, claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult, domain string) (Device, *Refusal) {
	ref := claim.Namespace + "/" + claim.Name
	n, ok := gpu.ParseChannelDeviceName(result.Device)
	if !ok {
		return Device{}, refuse(UnknownDevice, "claim %s, request %q: device %q of pool %q is not an IMEX channel (channel-0 to channel-%d)", ref, result.Request, result.Device, result.Pool, gpu.MaxIMEXChannel)
	}
	switch {
	case opts.NVLinkDomain == "":
		return Device{}, refuse(ForeignDomain, "claim %s, request %q: device %s is an IMEX channel of NVLink domain %q, but node %s is in no NVLink domain (its GPUs report no complete, healthy fabric): the claim's pods must run on the domain's nodes (its allocation's node selector says which)", ref, result.Request, result.Device, domain, opts.Node.Name)
	case domain != opts.NVLinkDomain:
		return Device{}, refuse(ForeignDomain, "claim %s, request %q: device %s is an IMEX channel of NVLink domain %q, but node %s is in domain %q: the claim's pods must run on the nodes of domain %q", ref, result.Request, result.Device, domain, opts.Node.Name, opts.NVLinkDomain, domain)
	case IsAdmin(result):
		return Device{}, refuse(ChannelMisuse, "claim %s, request %q: device %s is an IMEX channel, which cannot be allocated with adminAccess: a channel is what a job's pods share memory through, not something to monitor; ask for it without adminAccess", ref, result.Request, result.Device)
	}
	for _, c := range resourceclaim.ConfigForResult(claim.Status.Allocation.Devices.Config, result) {
		if c.Opaque != nil && c.Opaque.Driver == opts.DriverName {
			return Device{}, refuse(ChannelMisuse, "claim %s, request %q: device %s is an IMEX channel, and a %s config applies to it, which has no meaning for a channel: limit the config to the claim's GPU requests (its requests field)", ref, result.Request, result.Device, opts.DriverName)
		}
	}
	return Device{Result: result, Requests: []string{result.Request}, Channel: &gpu.IMEXChannel{Domain: domain, Number: n}}, nil
}
