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

package check

import (
	"errors"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Once a claim is allocated, check asks what gpudra's kubelet plugin asks
// at prepare, with the same code (internal/claimplan): the node's devices as
// the slices describe them (slicebuilder.NodeOf), the configs that apply
// to each, merged, and what the claims allocated before it hold on the
// same GPUs. What the plugin would refuse leaves the pod in
// ContainerCreating: a finding on the config or the request it is about.

// preparer owns what the nodes' plugins prepared (held): it asks, for
// each allocated claim, what the plugin asks at prepare, and reports
// what the plugin would refuse.
type preparer struct {
	opts     Options
	inv      *inventory
	report   *Report
	findings *findingLog
	// pub gives the pools' device model as their nodes publish it now.
	pub *publisher
	// known are the DeviceClasses the cluster would have, builtin those
	// that come from gpudra (their configs are not the user's to fix).
	known   map[string]scheduler.Object
	builtin map[string]bool
	// shareSharing is Options.ShareSharing, parsed.
	shareSharing *configapi.Sharing
	// held is what the nodes' plugins prepared: the claims allocated so
	// far, and a live cluster's (Options.Held). A gang that does not fit
	// puts back what it held before.
	held []heldDevice
}

// heldDevice is a device a claim holds on a node, as the node state
// records it.
type heldDevice struct {
	claim string // namespace/name
	pool  string
	dev   checkpoint.Device
}

// nodeOf is the node of one of gpudra's pools, read back from the
// inventory.
func (pb *publisher) nodeOf(pool string) gpu.Node {
	pb.flush()
	if n, ok := pb.nodes[pool]; ok {
		return n
	}
	var devs []resourceapi.Device
	for _, d := range pb.inv.poolDevices(pb.opts.DriverName, pool) {
		devs = append(devs, *d.dev)
	}
	n := slicebuilder.NodeOf(pool, devs)
	pb.nodes[pool] = n
	return n
}

// planOptions are the plugin's settings for a node of the pool.
func (pp *preparer) planOptions(pool string) claimplan.Options {
	return claimplan.Options{DriverName: pp.opts.DriverName, Node: pp.pub.nodeOf(pool), MPS: !pp.opts.MPSDisabled,
		SharesPublished: pp.sharesPublished(pool), ShareSharing: pp.shareSharing, NVLinkDomain: pp.nvlinkDomainOf(pool)}
}

// nvlinkDomainOf is the NVLink domain of a node's pool as its plugin knows
// it (internal/plugin's nvlinkDomain): the nvlinkDomain its GPUs carry, ""
// when none does or two disagree.
func (pp *preparer) nvlinkDomainOf(pool string) string {
	domain := ""
	for _, d := range pp.inv.poolDevices(pp.opts.DriverName, pool) {
		a, ok := d.dev.Attributes[slicebuilder.AttrNVLinkDomain]
		if !ok || a.StringValue == nil {
			continue
		}
		if domain != "" && domain != *a.StringValue {
			return ""
		}
		domain = *a.StringValue
	}
	return domain
}

// domainPool is a node pool of the given NVLink domain, "" when the
// inventory has none: where a claim of the domain's channels alone is
// prepared (every node of the domain prepares it alike).
func (pp *preparer) domainPool(domain string) string {
	for _, d := range pp.inv.devices {
		if d.driver != pp.opts.DriverName || isChannelPool(d.pool) {
			continue
		}
		if a, ok := d.dev.Attributes[slicebuilder.AttrNVLinkDomain]; ok && a.StringValue != nil && *a.StringValue == domain {
			return d.pool
		}
	}
	return ""
}

// sharesPublished reports whether the pool's slices publish its GPUs as
// shareable (consumable capacity), as the plugin knows of its own node.
func (pp *preparer) sharesPublished(pool string) bool {
	for _, d := range pp.inv.poolDevices(pp.opts.DriverName, pool) {
		if d.dev.AllowMultipleAllocations != nil && *d.dev.AllowMultipleAllocations {
			return true
		}
	}
	return false
}

// prepare runs the plugin's prepare-time decision on an allocated claim
// and, when the node would prepare it, records what it holds.
func (pp *preparer) prepare(ce *claimEval, res *resourceapi.AllocationResult) {
	pool := pp.poolOf(res)
	if pool == "" {
		return
	}
	claim := ce.claim.DeepCopy()
	claim.Status.Allocation = res
	planned, err := claimplan.Plan(pp.planOptions(pool), claim)
	var refusal *claimplan.Refusal
	if err != nil {
		if errors.As(err, &refusal) && !refusal.Static && refusal.Kind != claimplan.InvalidConfig {
			pp.refused(ce, refusal)
		}
		// A config that does not decode is reported where it is written.
		pp.report.Claims[ce.idx].PrepareFails = err.Error()
		return
	}
	for _, p := range planned {
		for _, h := range pp.held {
			if h.pool != pool || h.claim == ce.info.Name {
				continue
			}
			if refusal := claimplan.HeldConflict(p, h.dev, "ResourceClaim "+h.claim); refusal != nil {
				pp.refused(ce, refusal)
				pp.report.Claims[ce.idx].PrepareFails = refusal.Error()
				return
			}
		}
	}
	for _, p := range planned {
		pp.held = append(pp.held, heldDevice{claim: ce.info.Name, pool: pool, dev: p.Held()})
	}
}

// poolOf is the node pool where an allocation's gpudra devices are
// prepared, "" when it has none: the node's own pool, or, for a claim of
// an NVLink domain's IMEX channels alone (whose pool is no node's), a node
// of that domain, where the plugin runs the same checks as on every other
// node of the domain.
func (pp *preparer) poolOf(res *resourceapi.AllocationResult) string {
	channelDomain := ""
	for _, d := range res.Devices.Results {
		if d.Driver != pp.opts.DriverName {
			continue
		}
		domain, ok := strings.CutPrefix(d.Pool, slicebuilder.ChannelPoolPrefix)
		if !ok {
			return d.Pool
		}
		channelDomain = domain
	}
	if channelDomain == "" {
		return ""
	}
	return pp.domainPool(channelDomain)
}

// clusterHolds is what a live cluster's allocated claims hold on gpudra's
// nodes, as each node's plugin recorded it when it prepared them. A claim
// its node would refuse holds nothing there.
func (pp *preparer) clusterHolds(claims []*resourceapi.ResourceClaim) []heldDevice {
	var out []heldDevice
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		pool := pp.poolOf(c.Status.Allocation)
		if pool == "" {
			continue
		}
		planned, err := claimplan.Plan(pp.planOptions(pool), c)
		if err != nil {
			continue
		}
		for _, p := range planned {
			out = append(out, heldDevice{claim: c.Namespace + "/" + c.Name, pool: pool, dev: p.Held()})
		}
	}
	return out
}

// refused reports what the plugin refuses, on the config it is about, or
// else on the claim's request.
func (pp *preparer) refused(ce *claimEval, refusal *claimplan.Refusal) {
	src, object, field := ce.source, ce.object, pp.requestField(ce, refusal.Request)
	from := ""
	switch {
	case refusal.Config != nil && refusal.Config.FromClass && pp.builtin[refusal.Config.Class]:
		// A config of one of gpudra's own classes is nobody's to edit:
		// the claim that chose the class is what to change, so the
		// finding is on its request, and says where the config is.
		from = fmt.Sprintf(" (the config that says so is gpudra's DeviceClass %s's: choose another class for this claim)", refusal.Config.Class)
	case refusal.Config != nil:
		src, object, field = pp.configAt(ce, refusal.Config)
		if f := refusalField(refusal.Kind); f != "" {
			field += "." + f
		}
	}
	kind := FindingPrepareRefused
	if refusal.Kind == claimplan.ConfigKind {
		kind = FindingInvalidConfig
	}
	pp.findings.add(Finding{Kind: kind, Refusal: string(refusal.Kind), Source: src, Object: object, Field: field,
		Message: fmt.Sprintf("gpudra's kubelet plugin refuses to prepare claim %s (its pods stay in ContainerCreating): %s%s", ce.info.Name, refusal.Msg, from),
		Hint:    refusalHint(refusal, pp.opts.DriverName)})
}

// refusalField is the field of the config a refusal is about.
func refusalField(kind claimplan.Kind) string {
	switch kind {
	case claimplan.MPSLimitKey:
		return "parameters.sharing.mps.perDevicePinnedMemoryLimits"
	case claimplan.MPSUnavailable, claimplan.MPSMultipleDevices, claimplan.SharingConflict:
		return "parameters.sharing"
	}
	return ""
}

// refusalHint says how to fix what the plugin refuses.
func refusalHint(refusal *claimplan.Refusal, driver string) string {
	switch refusal.Kind {
	case claimplan.ConfigKind:
		return "give the requests for MIG partitions (DeviceClass mig.gpudra.io or mig-<profile>.gpudra.io) a MigConfig and those for whole GPUs a GpuConfig, each naming its requests in config[].requests"
	case claimplan.MPSMultipleDevices:
		return "ask for one device per claim that uses MPS (count: 1, one request), and give each pod that needs another shared GPU a claim of its own"
	case claimplan.MPSUnavailable:
		return "this node pool runs no MPS daemons (the chart's mps.enabled: false): enable them, or share the GPU with sharing.strategy: TimeSlicing"
	case claimplan.MPSLimitKey:
		return `key the limit by "0", the claim's one MPS device as its containers see it, or set sharing.mps.defaultPinnedDeviceMemoryLimit`
	case claimplan.SharesDiffer:
		return "requests of one claim that are given shares of one GPU get it as one device: give them one config (one config[] entry naming both requests, or none), or ask for one share of their sum in one request"
	case claimplan.SharingConflict:
		return "claims that share one GPU must share it alike: all through MPS, or all time-sliced with the same interval (a share without a config gets the node pool's consumableCapacity.sharing)"
	case claimplan.MonitorWithoutAdmin:
		return fmt.Sprintf("monitoring devices (DeviceClass %s) are for adminAccess: true requests only: a workload's class selects whole GPUs (type == 'gpu', as DeviceClass %s does) and does not tolerate %s (on clusters that drop device taints, before 1.36, nothing else keeps it off them)",
			builtinClassName("gpu-monitoring.gpudra.io", driver), driver, slicebuilder.MonitoringTaintKey(driver))
	}
	return ""
}

// requestField is the field of a claim's request ("gpu" or "gpu/sub").
func (pp *preparer) requestField(ce *claimEval, request string) string {
	base, sub, _ := strings.Cut(request, "/")
	for i, req := range ce.claim.Spec.Devices.Requests {
		if req.Name != base {
			continue
		}
		f := fmt.Sprintf("%s.devices.requests[%d]", ce.field, i)
		for j, s := range req.FirstAvailable {
			if s.Name == sub {
				return fmt.Sprintf("%s.firstAvailable[%d]", f, j)
			}
		}
		return f
	}
	return ce.field + ".devices"
}

// configAt finds where a config is written: in the claim's spec, or in
// the DeviceClass it comes from.
func (pp *preparer) configAt(ce *claimEval, ref *claimplan.ConfigRef) (scheduler.Source, string, string) {
	if ref.FromClass {
		if o, ok := pp.known[ref.Class]; ok {
			for i, cc := range o.Obj.(*resourceapi.DeviceClass).Spec.Config {
				if cc.Opaque != nil && string(cc.Opaque.Parameters.Raw) == string(ref.Parameters) {
					return o.Source, "DeviceClass " + ref.Class, fmt.Sprintf("spec.config[%d].opaque", i)
				}
			}
		}
		return ce.source, ce.object, ce.field + ".devices"
	}
	if ref.Index >= 0 {
		return ce.source, ce.object, fmt.Sprintf("%s.devices.config[%d].opaque", ce.field, ref.Index)
	}
	return ce.source, ce.object, ce.field + ".devices.config"
}

// shareSharingOf parses Options.ShareSharing ("" is the plugin's default,
// MPS).
func shareSharingOf(s string) (*configapi.Sharing, error) {
	if s == "" {
		s = string(configapi.MPSStrategy)
	}
	return configapi.SharingFromFlag(s)
}
