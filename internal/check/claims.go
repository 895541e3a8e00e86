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
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/spelling"
)

// unit is what is allocated at once: one pod's claims, or one claim.
type unit struct {
	pod    string // namespace/name, "" for a lone claim
	podObj scheduler.Object
	byName map[string]*claimEval // pod claim name → claim
	claims []*claimEval
	// extended is the claim the scheduler makes for the pod's extended
	// resources, and ext what it made it from.
	extended *claimEval
	ext      scheduler.ExtendedResources
	// blocked says why the pod cannot be scheduled whatever its claims
	// get (an extended resource nothing offers).
	blocked []string
	// gang is the pod's PodGroup among the inputs (gangs.go), or nil.
	gang *gangInfo
	// group is what the unit is allocated with, without --sequential:
	// the replicas of one workload, which run together.
	group string
}

type claimEval struct {
	// info is the claim's entry of report.Claims while the claims are
	// made; once allocation starts, write report.Claims[idx] instead
	// (appends move the entries).
	info   *ClaimInfo
	idx    int // in report.Claims
	claim  *resourceapi.ResourceClaim
	object string // for findings
	field  string // "spec" or "spec.spec"
	source scheduler.Source
	reqs   []*reqEval
	// invalid: the API server would reject the claim; it is not allocated.
	invalid bool
	// allocated, once done (a shared claim used by several pods)
	done bool
	node string
}

type reqEval struct {
	name      string // request or request/subrequest
	class     string
	mode      resourceapi.DeviceAllocationMode
	count     int64
	admin     bool
	tolerates []resourceapi.DeviceToleration
	missing   bool // class not defined
	broken    bool // class or selector does not compile
	// classHits and match are per inventory device, and shared by the
	// requests with the same class and selectors (unitBuilder.requestMatches):
	// read only.
	classHits []bool
	match     []bool
	selCounts []int // per request selector: class matches it keeps
	selErrors int   // class matches on which a request selector fails
	// selectors are the request's own; capacity its capacity requests.
	selectors []*selector
	capacity  map[resourceapi.QualifiedName]resource.Quantity
	sub       []*reqEval
}

// podInfo says what each container of a pod would receive.
func podInfo(rep *Report, u *unit) PodInfo {
	pod := u.podObj.Obj.(*v1.Pod)
	pi := PodInfo{Name: u.pod, Source: u.podObj.Source, Owner: u.podObj.Owner, Blocked: u.blocked}
	claims := u.claims
	if u.extended != nil {
		claims = append(claims[:len(claims):len(claims)], u.extended)
	}
	for _, ce := range claims {
		ci := &rep.Claims[ce.idx]
		if ci.Allocation != nil {
			pi.Node = ci.Allocation.Node
		} else {
			pi.Pending = true
		}
		if ci.PrepareFails != "" {
			pi.PrepareFails = append(pi.PrepareFails, "claim "+ci.Name+": "+ci.PrepareFails)
		}
	}
	if len(u.claims) < len(pod.Spec.ResourceClaims) || len(u.blocked) > 0 {
		pi.Pending = true
	}
	switch {
	case pi.Pending:
		pi.Node = ""
	case pi.Node == "":
		// Bound by whoever wrote it (nodename.go).
		pi.Node = pod.Spec.NodeName
	}
	pi.NoDRA = len(pod.Spec.ResourceClaims) == 0 && u.extended == nil && len(u.blocked) == 0
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		ci := ContainerInfo{Name: c.Name, Devices: []string{}}
		for _, rc := range c.Resources.Claims {
			ce, ok := u.byName[rc.Name]
			if !ok {
				continue
			}
			ci.Devices = append(ci.Devices, devicesOf(rep, ce, rc.Name, rc.Request)...)
		}
		if u.extended != nil {
			for _, m := range u.ext.Mappings {
				if m.ContainerName == c.Name {
					ci.Devices = append(ci.Devices, devicesOf(rep, u.extended, m.ResourceName, m.RequestName)...)
				}
			}
		}
		if len(ci.Devices) > 0 || len(c.Resources.Claims) > 0 || !isInit(pod, c.Name) {
			pi.Containers = append(pi.Containers, ci)
		}
	}
	return pi
}

// devicesOf lists a claim's allocated devices for one request (all of
// them when request is ""), labelled with what the container named. A
// device allocated to several requests of the claim (shares of one GPU,
// consumable capacity) is listed once, as the plugin prepares it: one
// device for all of them, with the sum of the shares.
func devicesOf(rep *Report, ce *claimEval, label, request string) []string {
	a := rep.Claims[ce.idx].Allocation
	if a == nil {
		return nil
	}
	var devices []AllocatedDevice
	requests := map[string][]string{} // by driver, pool and device
	key := func(d AllocatedDevice) string { return d.Driver + "/" + d.Pool + "/" + d.Device }
	for _, d := range a.Devices {
		base, _, _ := strings.Cut(d.Request, "/")
		if request != "" && request != base && request != d.Request {
			continue
		}
		if _, seen := requests[key(d)]; !seen {
			devices = append(devices, d)
		}
		requests[key(d)] = append(requests[key(d)], d.Request)
	}
	out := make([]string, 0, len(devices))
	for _, d := range devices {
		if reqs := requests[key(d)]; len(reqs) > 1 {
			out = append(out, fmt.Sprintf("%s (claim %s, requests %s: their shares as one device)", d.Device, label, strings.Join(reqs, ", ")))
		} else {
			out = append(out, fmt.Sprintf("%s (claim %s, request %s)", d.Device, label, d.Request))
		}
	}
	return out
}

func isInit(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// checkContainerClaims reports containers that name a pod claim that
// does not exist (the API server rejects the pod), or a request its claim
// does not have: the API server cannot know the claim's requests, and the
// kubelet gives the container the CDI devices of the requests it names
// (pkg/kubelet/cm/dra: GetResources, cdiDevicesAsList), none for a request
// the claim lacks, so the container runs without them.
func (ub *unitBuilder) checkContainerClaims(o scheduler.Object, pod *v1.Pod, byName map[string]*claimEval) {
	names := map[string]bool{}
	for _, pc := range pod.Spec.ResourceClaims {
		names[pc.Name] = true
	}
	for _, list := range []struct {
		field      string
		containers []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i, c := range list.containers {
			for j, rc := range c.Resources.Claims {
				field := fmt.Sprintf("spec.%s[%d].resources.claims[%d]", list.field, i, j)
				if !names[rc.Name] {
					ub.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: "Pod " + o.Name, Field: field + ".name",
						Message: fmt.Sprintf("container %s uses claim %q, which spec.resourceClaims does not define; the API server rejects the pod", c.Name, rc.Name)})
					continue
				}
				ce := byName[rc.Name]
				if rc.Request == "" || ce == nil || claimHasRequest(ce.claim, rc.Request) {
					continue
				}
				var have []string
				for _, req := range ce.claim.Spec.Devices.Requests {
					have = append(have, req.Name)
				}
				ub.findings.add(Finding{Kind: FindingUnknownRequest, Severity: SeverityWarning, Source: o.Source, Object: podObject(o), Field: field + ".request",
					Message: fmt.Sprintf("container %s uses request %q of claim %s, which %s does not have (its requests: %s): the API server cannot tell, and the kubelet gives the container the devices of the requests it names, so it runs without a device from this claim",
						c.Name, rc.Request, rc.Name, claimOrigin(ce), strings.Join(have, ", ")),
					Hint: requestHint(rc.Request, have)})
			}
		}
	}
}

// claimHasRequest says whether a claim has a request of that name (a
// container names requests, never their firstAvailable subrequests).
func claimHasRequest(claim *resourceapi.ResourceClaim, name string) bool {
	for _, req := range claim.Spec.Devices.Requests {
		if req.Name == name {
			return true
		}
	}
	return false
}

// claimOrigin names the object a pod's claim is written in.
func claimOrigin(ce *claimEval) string {
	if ce.object != "" {
		return ce.object
	}
	return "ResourceClaim " + ce.claim.Namespace + "/" + ce.claim.Name
}

func requestHint(name string, have []string) string {
	h := "name one of the claim's requests, or leave request out to give the container all of the claim's devices"
	if c := spelling.Closest(name, have); c != "" {
		h = fmt.Sprintf("did you mean %q? ", c) + h
	}
	return h
}

// podObject names the object a pod comes from, for findings about what is
// written in it: its workload (said once for all the replicas) or itself.
func podObject(o scheduler.Object) string {
	if o.Owner != "" {
		owner, _, _ := strings.Cut(o.Owner, " (")
		return owner
	}
	return "Pod " + o.Name
}

func (ub *unitBuilder) newClaim(claim *resourceapi.ResourceClaim, from string, src scheduler.Source, object, field string) *claimEval {
	// What a cluster once decided (a claim exported with its status) is
	// no input: check allocates the spec afresh.
	claim.Status = resourceapi.ResourceClaimStatus{}
	scheduler.DefaultClaimSpec(&claim.Spec)
	claim.UID = types.UID("gpudra-check-" + claim.Namespace + "-" + claim.Name)
	ub.report.Claims = append(ub.report.Claims, ClaimInfo{Name: claim.Namespace + "/" + claim.Name, From: from, Source: src})
	ce := &claimEval{idx: len(ub.report.Claims) - 1, claim: claim, object: object, field: field, source: src}
	for i, req := range claim.Spec.Devices.Requests {
		f := fmt.Sprintf("%s.devices.requests[%d]", field, i)
		var re *reqEval
		switch {
		case req.Exactly != nil && len(req.FirstAvailable) > 0:
			ce.invalid = true // the scheduler package reports what the API server rejects
			continue
		case req.Exactly != nil:
			e := req.Exactly
			re = ub.newRequest(req.Name, e.DeviceClassName, e.AllocationMode, e.Count, e.AdminAccess, e.Tolerations, e.Selectors, e.Capacity, src, object, f+".exactly")
		case len(req.FirstAvailable) > 0:
			re = &reqEval{name: req.Name}
			if !ub.feats.Allocator.PrioritizedList {
				ub.findings.add(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: f + ".firstAvailable",
					Message: fmt.Sprintf("firstAvailable needs the DRAPrioritizedList feature, which Kubernetes %s does not enable", ub.report.KubernetesVersion)})
			}
			for j, sub := range req.FirstAvailable {
				re.sub = append(re.sub, ub.newRequest(req.Name+"/"+sub.Name, sub.DeviceClassName, sub.AllocationMode, sub.Count, nil, sub.Tolerations, sub.Selectors, sub.Capacity, src, object, fmt.Sprintf("%s.firstAvailable[%d]", f, j)))
			}
		default:
			ce.invalid = true
			continue
		}
		ce.reqs = append(ce.reqs, re)
	}
	ce.info = &ub.report.Claims[ce.idx]
	ub.eval.checkClaimConfigs(ce)
	ub.eval.checkConstraints(ce)
	for _, re := range ce.reqs {
		ub.report.Claims[ce.idx].Requests = append(ub.report.Claims[ce.idx].Requests, ub.requestInfo(re))
	}
	return ce
}

func (ub *unitBuilder) requestInfo(re *reqEval) RequestInfo {
	ri := RequestInfo{Name: re.name, Class: re.class, Mode: string(re.mode), Count: re.count}
	if re.sub != nil {
		for _, s := range re.sub {
			ri.Sub = append(ri.Sub, ub.requestInfo(s))
		}
		return ri
	}
	if re.mode == resourceapi.DeviceAllocationModeAll {
		ri.Count = 0
	}
	ri.Matches = ub.eval.matches(re.match)
	return ri
}

func (ub *unitBuilder) newRequest(name, class string, mode resourceapi.DeviceAllocationMode, count int64, admin *bool, tol []resourceapi.DeviceToleration,
	sels []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements, src scheduler.Source, object, field string) *reqEval {
	re := &reqEval{name: name, class: class, mode: mode, count: count, admin: admin != nil && *admin, tolerates: tol,
		match: make([]bool, len(ub.inv.devices))}
	if capacity != nil {
		re.capacity = capacity.Requests
	}
	ce := ub.eval.class(class)
	switch {
	case ce == nil:
		re.missing = true
		ub.findings.add(Finding{Kind: FindingUnknownClass, Source: src, Object: object, Field: field + ".deviceClassName",
			Message: fmt.Sprintf("DeviceClass %q is not defined in the inputs (nor built in): the claim cannot be allocated", class),
			Hint:    ub.eval.classHintFor(class)})
	case ce.broken:
		re.broken = true
	default:
		copy(re.match, ce.match)
	}
	// Requests with the same class and selectors match the same devices:
	// the vectors are computed once and shared (thousands of claims over
	// a fleet's devices held a gigabyte otherwise).
	key, known := requestMatchKey(class, sels), (*requestMatch)(nil)
	if key != "" && !re.missing && !re.broken {
		known = ub.requestMatches[key]
	}
	if known != nil {
		re.classHits, re.match = known.classHits, known.match
	} else {
		re.classHits = append([]bool(nil), re.match...)
	}
	ub.eval.checkCapacityRequests(re, src, object, field+".capacity.requests")
	for i, sel := range sels {
		f := fmt.Sprintf("%s.selectors[%d].cel.expression", field, i)
		if sel.CEL == nil {
			ub.findings.add(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: fmt.Sprintf("%s.selectors[%d].cel", field, i), Message: "a selector needs cel"})
			re.broken = true
			continue
		}
		s := ub.eval.addSelector(src, object, f, sel.CEL.Expression)
		re.selectors = append(re.selectors, s)
		if !s.ok {
			re.broken = true
			continue
		}
		res := ub.eval.evaluate(s, re.classHits, class)
		ub.eval.recordCounts(s, res, re.classHits)
		ub.eval.reportRuntimeErrors(s, res, re.classHits, object, f, " that DeviceClass "+class+" matches")
		if known != nil {
			continue
		}
		kept := 0
		for j := range re.match {
			if re.classHits[j] && res.match[j] {
				kept++
			}
			if _, failed := res.errs[j]; failed && re.classHits[j] {
				re.selErrors++
			}
			re.match[j] = re.match[j] && res.match[j]
		}
		re.selCounts = append(re.selCounts, kept)
	}
	switch {
	case known != nil:
		re.selCounts, re.selErrors = known.selCounts, known.selErrors
	case re.broken:
		for j := range re.match {
			re.match[j] = false
		}
	case key != "" && !re.missing:
		if ub.requestMatches == nil {
			ub.requestMatches = map[string]*requestMatch{}
		}
		ub.requestMatches[key] = &requestMatch{classHits: re.classHits, match: re.match, selCounts: re.selCounts, selErrors: re.selErrors}
	}
	return re
}

// requestMatch is what a request's class and selectors match: the shared
// part of reqEval.
type requestMatch struct {
	classHits, match []bool
	selCounts        []int
	selErrors        int
}

// requestMatchKey identifies a request's class and selectors ("" when a
// selector is not CEL: such a request is broken anyway).
func requestMatchKey(class string, sels []resourceapi.DeviceSelector) string {
	var b strings.Builder
	b.WriteString(class)
	for _, sel := range sels {
		if sel.CEL == nil {
			return ""
		}
		b.WriteByte(0)
		b.WriteString(sel.CEL.Expression)
	}
	return b.String()
}
