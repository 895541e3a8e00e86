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
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// allocate schedules a unit as the scheduler schedules a pod: all its
// claims that are not allocated yet together, on the first node where
// they fit, through the offline scheduler core.
func (r *runner) allocate(u *unit) {
	p := newPlacing(u)
	if len(p.todo) == 0 || r.blockedBefore(p) {
		return
	}
	if p.pod != nil {
		if ok, why := r.fitsNodes(p.pod); !ok {
			for _, ce := range p.todo {
				r.unsatisfiable(ce, why)
			}
			r.noNodeFinding(u, why)
			return
		}
	}
	if !r.opts.Sequential && (u.group == "" || u.group != r.group) {
		r.resetState()
		r.group = u.group
	}
	if r.unusable(p.todo) {
		return
	}
	place, err := r.schedule(p)
	r.settle(p, place, err)
}

// placing is a unit's claims while allocate places them.
type placing struct {
	u   *unit
	pod *v1.Pod // nil for a lone claim
	// all are the unit's claims, with the one for its extended resources,
	// and claims their objects for the scheduler, in the same order; todo
	// are those not allocated yet. The claims allocated already (shared
	// with an earlier pod) pin the pod to their node, pinned ("" when
	// none is).
	all    []*claimEval
	claims []*resourceapi.ResourceClaim
	todo   []*claimEval
	pinned string
}

func newPlacing(u *unit) *placing {
	p := &placing{u: u, all: u.claims}
	if u.pod != "" {
		p.pod = u.podObj.Obj.(*v1.Pod)
	}
	if u.extended != nil {
		p.all = append(p.all[:len(p.all):len(p.all)], u.extended)
	}
	for _, ce := range p.all {
		p.claims = append(p.claims, ce.claim)
		if ce.done {
			p.pinned = ce.node
			continue
		}
		p.todo = append(p.todo, ce)
	}
	return p
}

// blockedBefore says whether the unit's claims stay unallocated whatever
// the inventory holds, marking them so: a claim of the pod found
// unsatisfiable earlier, or what blocks the pod itself (unit.blocked).
func (r *runner) blockedBefore(p *placing) bool {
	u, all, todo := p.u, p.all, p.todo
	// A claim of the pod found unsatisfiable earlier (shared with an
	// earlier pod) keeps the whole pod Pending: the scheduler allocates
	// none of its claims, so none holds a device.
	for _, ce := range all {
		if ce.done && ce.claim.Status.Allocation == nil {
			for _, other := range todo {
				r.unsatisfiable(other, podBlockedBy(ce))
			}
			// The finding that says why counts this replica too.
			if u.podObj.Owner != "" {
				r.pending.also(u.podObj.Owner+"\x00"+ce.source.String(), u.pod)
			}
			return true
		}
	}
	if len(u.blocked) > 0 {
		for _, ce := range todo {
			r.unsatisfiable(ce, "the pod cannot be scheduled: "+strings.Join(u.blocked, "; "))
		}
		return true
	}
	return false
}

// unusable says whether a claim to allocate cannot be, marking the
// claims so: the API server rejects it, or a class or selector of it is
// unusable.
func (r *runner) unusable(todo []*claimEval) bool {
	for _, ce := range todo {
		if ce.invalid {
			for _, other := range todo {
				r.unsatisfiable(other, "the API server rejects claim "+ce.info.Name+" (see the findings): it is never allocated")
			}
			return true
		}
	}
	for _, ce := range todo {
		for _, re := range ce.reqs {
			if re.missing || re.broken || anySub(re, func(s *reqEval) bool { return s.missing || s.broken }) {
				r.unsatisfiable(ce, "a request's DeviceClass or selectors are unusable (see the findings above): the scheduler cannot allocate this claim")
				return true
			}
		}
	}
	return false
}

// schedule runs the scheduler's filter and allocator for the claims on
// the nodes the pod may run on, with the spares a gang is given.
func (r *runner) schedule(p *placing) (*scheduler.Placement, error) {
	pod, claims, todo := p.pod, p.claims, p.todo
	r.pub.flush()
	place, err := r.sched.Schedule(r.ctx, r.state, claims, func(node *v1.Node) bool {
		if pod != nil {
			if ok, _ := scheduler.PodFitsNode(pod, node); !ok {
				return false
			}
		}
		if r.fence != nil && !r.fence(node) {
			return false
		}
		return r.mayFit(todo, node.Name)
	})
	if place != nil {
		r.report.Stats.AllocateRuns += place.Tried
	}
	if errors.Is(err, scheduler.ErrUnschedulable) && r.gangSpares != nil {
		// A gang tried with the spares gpudra-controller would give it.
		if spared := r.giveGangSpare(pod, claims); spared != nil {
			place, err = spared, nil
		}
	}
	return place, err
}

// settle records what schedule found for the unit's claims: where they
// are allocated, or why not.
func (r *runner) settle(p *placing, place *scheduler.Placement, err error) {
	todo := p.todo
	var fe *scheduler.FilterError
	switch {
	case err == nil:
		for i, ce := range p.all {
			if res := place.Results[i]; res != nil {
				r.record(ce, place.Node.Name, res)
			}
		}
	case errors.As(err, &fe) && fe.Timeout:
		msg := fmt.Sprintf("the allocator did not finish within %s on node %s; the scheduler gives up likewise (DRASchedulerFilterTimeout, 10s by default): too many combinations to try (large counts with constraints?)", r.opts.AllocateTimeout, fe.Node)
		for _, ce := range todo {
			r.unsatisfiable(ce, msg)
			r.findings.add(Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Field: ce.field + ".devices", Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg)})
		}
	case errors.As(err, &fe):
		msg := "the scheduler stops with an error on node " + fe.Node + ": " + fe.Err.Error()
		for _, ce := range todo {
			r.unsatisfiable(ce, msg)
			r.findings.add(Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Field: ce.field + ".devices", Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg),
				Hint: "a selector that fails on a device aborts scheduling; see the runtime-error findings"})
		}
	case errors.Is(err, scheduler.ErrUnschedulable) && r.waitsForSpare(p.pod, p.claims, todo):
		// reported: Pending until a node is given a spare
	case errors.Is(err, scheduler.ErrUnschedulable):
		r.explain(p.u, todo, p.pinned)
	default:
		for _, ce := range todo {
			r.unsatisfiable(ce, "the scheduler cannot try this claim: "+err.Error())
		}
	}
}

func anySub(re *reqEval, f func(*reqEval) bool) bool {
	for _, s := range re.sub {
		if f(s) {
			return true
		}
	}
	return false
}

// record keeps a claim's allocation: in the report, in the claim (so that
// a pod sharing it is pinned to its node), and in the state.
func (r *runner) record(ce *claimEval, node string, res *resourceapi.AllocationResult) {
	a := &Allocation{Node: node}
	for _, d := range res.Devices.Results {
		a.Devices = append(a.Devices, AllocatedDevice{Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device})
	}
	r.state.Add(ce.info.Name, res)
	ce.claim.Status.Allocation = res
	ce.done, ce.node = true, node
	r.report.Claims[ce.idx].Allocation = a
	r.prep.prepare(ce, res)
	switch {
	case !r.opts.Sequential && r.group == "":
		// The next claim sees an empty cluster: nothing to republish.
	case r.inGang && !r.gangRefill:
		// A gang binds whole: no prepare runs before all of it is placed.
	default:
		r.pub.republish(node, res)
	}
}

// resetState forgets every allocation of the inputs: the next claims see
// an empty cluster, or what a live cluster's claims hold (Options.Held),
// and the nodes publish what they published before.
func (r *runner) resetState() {
	r.state = r.clusterState.Clone()
	r.prep.held = slices.Clone(r.clusterHeld)
	r.pub.restore(nil)
}

func (r *runner) unsatisfiable(ce *claimEval, reasons ...string) {
	ci := &r.report.Claims[ce.idx]
	ci.Unsatisfiable = append(ci.Unsatisfiable, reasons...)
	ce.done = true
}

// mayFit is a necessary condition for the unit to fit on the node: every
// request has enough matching, free devices there. It spares the
// allocator nodes that cannot work.
func (r *runner) mayFit(claims []*claimEval, node string) bool {
	if _, ok := r.pub.republished[node]; ok {
		return true // devices the inventory does not hold may be published now
	}
	for _, ce := range claims {
		for _, re := range ce.reqs {
			if !r.requestMayFit(re, node) {
				return false
			}
		}
	}
	return true
}

func (r *runner) requestMayFit(re *reqEval, node string) bool {
	if re.sub != nil {
		for _, s := range re.sub {
			if r.requestMayFit(s, node) {
				return true
			}
		}
		return false
	}
	n := r.inv.countOn(r.state, re.match, node, !re.admin)
	if re.mode == resourceapi.DeviceAllocationModeAll {
		return n > 0
	}
	return int64(n) >= re.count
}
