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
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// nvlinkDomains answers what the scheduler does around multi-node NVLink
// (below): which claims ask for an NVLink domain's IMEX channels, which
// domains a gang that does may be placed in, and what to warn about. It
// reads the inventory and the scheduler's nodes; it owns no state.
type nvlinkDomains struct {
	opts     Options
	sched    *scheduler.Scheduler
	inv      *inventory
	findings *findingLog
}

// Multi-node NVLink (docs/nvlink.md): an NVLink domain's IMEX channels
// are one pool, published for all the domain's nodes (a pool-level node
// selector on the node label gpu.gpudra.io/nvlink-domain). A claim for a
// channel is allocated from one domain's pool, and the allocation's node
// selector then admits only that domain's nodes: every pod that shares
// the claim runs in that domain. The real allocator and the scheduler
// core do that already; what this file adds is what the scheduler does
// around it:
//
//   - nodes read from the inventory (no Node object among the inputs) carry
//     the domain label and the IMEX readiness label, as gpudra-controller
//     labels them, taken from their GPUs' nvlinkDomain and imexReady
//     attributes (a GPU without imexReady counts as ready, as the
//     controller counts it);
//   - a gang (a PodGroup) with a channel claim is placed in one domain or
//     not at all: each domain is tried in turn, as topology-aware
//     workload scheduling (or Kueue TAS) on the domain label picks one with
//     room for the whole gang, and a gang that fits no single domain waits
//     whole;
//   - a standalone channel claim that several pods share outside a gang
//     is a warning: the first pod's binding fixes the domain, even when
//     that domain lacks room for the others.

// labelNVLinkDomains gives each node the scheduler knows without a Node
// object among the inputs (nodeObjs) the domain label of its GPUs' nvlinkDomain attribute, and
// the IMEX readiness label unless a GPU says imexReady false. It returns
// a note for the report saying what it assumed, "" when it labelled no
// node.
func labelNVLinkDomains(sched *scheduler.Scheduler, nodeObjs []*v1.Node, driverName string) string {
	given := map[string]bool{}
	for _, n := range nodeObjs {
		given[n.Name] = true
	}
	domainOf := map[string]string{}
	notReady := map[string]bool{}
	for _, s := range sched.Slices() {
		node := ptr.Deref(s.Spec.NodeName, "")
		if node == "" || s.Spec.Driver != driverName {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[slicebuilder.AttrNVLinkDomain]; ok && a.StringValue != nil {
				domainOf[node] = *a.StringValue
			}
			if a, ok := d.Attributes[slicebuilder.AttrIMEXReady]; ok && a.BoolValue != nil && !*a.BoolValue {
				notReady[node] = true
			}
		}
	}
	label := slicebuilder.NVLinkDomainLabel(driverName)
	ready := slicebuilder.IMEXReadyLabel(driverName)
	labelled, down := 0, 0
	for _, n := range sched.Nodes() {
		if d := domainOf[n.Name]; d != "" && !given[n.Name] {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[label] = d
			labelled++
			if notReady[n.Name] {
				down++
			} else {
				n.Labels[ready] = "true"
			}
		}
	}
	if labelled == 0 {
		return ""
	}
	return fmt.Sprintf("%d node(s) in NVLink domains labelled as gpudra-controller labels them (%s, %s): %d with the IMEX daemon ready, as their GPUs' imexReady says (or, without it, as the controller assumes); check cannot ask a daemon itself",
		labelled, label, ready, labelled-down)
}

// isChannelPool says whether a pool is an NVLink domain's channel pool.
func isChannelPool(pool string) bool {
	return strings.HasPrefix(pool, slicebuilder.ChannelPoolPrefix)
}

// asksForChannel says whether a claim has a request that matches IMEX
// channels of a domain's pool.
func (nd *nvlinkDomains) asksForChannel(ce *claimEval) bool {
	var matches func(re *reqEval) bool
	matches = func(re *reqEval) bool {
		for i, m := range re.match {
			if m && nd.inv.devices[i].driver == nd.opts.DriverName && isChannelPool(nd.inv.devices[i].pool) {
				return true
			}
		}
		return slices.ContainsFunc(re.sub, matches)
	}
	return slices.ContainsFunc(ce.reqs, matches)
}

// gangAsksForChannel says whether a claim of a gang's pods asks for an
// IMEX channel.
func (nd *nvlinkDomains) gangAsksForChannel(members []*unit) bool {
	return slices.ContainsFunc(members, func(u *unit) bool { return slices.ContainsFunc(u.claims, nd.asksForChannel) })
}

// gangDomains are the NVLink domains a gang is tried in, one after the
// other: all of the inventory's, when one of its claims asks for a
// channel and there are several; nil otherwise.
func (nd *nvlinkDomains) gangDomains(members []*unit) []string {
	if !nd.gangAsksForChannel(members) {
		return nil
	}
	label := slicebuilder.NVLinkDomainLabel(nd.opts.DriverName)
	var domains []string
	for _, n := range nd.sched.Nodes() {
		if d := n.Labels[label]; d != "" && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	if len(domains) < 2 {
		return nil
	}
	return domains
}

// checkGangTopology warns of a gang of several pods with an IMEX channel
// claim whose PodGroup does not give the NVLink domain label as its
// topology (spec.schedulingConstraints.topology). check places such a
// gang by trying each domain in turn, but kube-scheduler 1.37 does so
// only for a PodGroup with that constraint (TopologyAwareWorkloadScheduling);
// without it the pod-group cycle places the pods one after the other, the
// first one's channel allocation fences the rest into the domain of the
// node that scored best, and a gang that does not fit there is retried
// with the same choice for as long as the scores stay the same (measured
// on the local cluster: the first worker on the one-tray domain's node
// in every retry for three minutes).
func (nd *nvlinkDomains) checkGangTopology(g *gangInfo, members []*unit) {
	if g.minCount < 2 || !nd.gangAsksForChannel(members) {
		return
	}
	label := slicebuilder.NVLinkDomainLabel(nd.opts.DriverName)
	pg := g.obj.Obj.(*schedulingv1beta1.PodGroup)
	if c := pg.Spec.SchedulingConstraints; c != nil && slices.ContainsFunc(c.Topology, func(t schedulingv1beta1.TopologyConstraint) bool { return t.Key == label }) {
		nd.findings.add(Finding{Kind: FindingNotApplied, Severity: SeverityNote, Source: g.obj.Source, Object: "PodGroup " + g.obj.Name, Field: "spec.schedulingConstraints",
			Message: fmt.Sprintf("the topology constraint on %s takes effect only where kube-apiserver and kube-scheduler enable TopologyAwareWorkloadScheduling (alpha in 1.37, off by default; without it the API server drops the field); checked as on a cluster that enables it", label)})
		return
	}
	nd.findings.add(Finding{Kind: FindingGangWithoutDomainTopology, Severity: SeverityWarning, Source: g.obj.Source, Object: "PodGroup " + g.obj.Name, Field: "spec",
		Message: fmt.Sprintf("PodGroup %s is a gang of %d pods with an IMEX channel claim, and no topology constraint on %s: kube-scheduler then places its pods one after the other, the first pod's channel fixes the NVLink domain by ordinary node scoring, and in a domain without room for the rest the gang waits, retried with the same choice while nothing changes (check tried each domain, as the scheduler does with the constraint)", g.obj.Name, g.minCount, label),
		Hint:    fmt.Sprintf("add spec.schedulingConstraints.topology: [{key: %s}] to the PodGroup (TopologyAwareWorkloadScheduling, alpha in Kubernetes 1.37), or admit the job with Kueue TAS at that level (docs/nvlink.md)", label)})
}

// fenceTo admits only the nodes of one NVLink domain to allocate, or
// every node ("").
func (r *runner) fenceTo(domain string) {
	if domain == "" {
		r.fence = nil
		return
	}
	label := slicebuilder.NVLinkDomainLabel(r.opts.DriverName)
	r.fence = func(n *v1.Node) bool { return n.Labels[label] == domain }
}

// attempt is what placing a gang changes beyond the scheduler's state,
// saved so that a try in one NVLink domain that fails leaves no trace.
type attempt struct {
	findings int
	seen     map[string]bool
	pending  map[string]*pendingReplicas
	order    int
	claims   map[*claimEval]claimState
}

type claimState struct {
	done  bool
	node  string
	alloc bool
	info  ClaimInfo
}

func (r *runner) saveAttempt(members []*unit) *attempt {
	a := &attempt{findings: len(r.report.Findings), seen: maps.Clone(r.findings.seen), claims: map[*claimEval]claimState{}}
	a.pending, a.order = r.pending.save()
	for _, u := range members {
		for _, ce := range r.unitClaims(u) {
			info := r.report.Claims[ce.idx]
			info.Unsatisfiable = slices.Clone(info.Unsatisfiable)
			a.claims[ce] = claimState{done: ce.done, node: ce.node, alloc: ce.claim.Status.Allocation != nil, info: info}
		}
	}
	return a
}

func (r *runner) restoreAttempt(a *attempt) {
	r.report.Findings = r.report.Findings[:a.findings]
	r.findings.seen = a.seen
	r.pending.restore(a.pending, a.order)
	for ce, s := range a.claims {
		ce.done, ce.node = s.done, s.node
		if !s.alloc {
			ce.claim.Status.Allocation = nil
		}
		r.report.Claims[ce.idx] = s.info
	}
}

// allocateGangInDomains tries the gang in each NVLink domain in turn and
// keeps the first placement; when none holds the whole gang, it waits
// whole, holding nothing.
func (r *runner) allocateGangInDomains(g *gangInfo, members []*unit, domains []string) {
	for _, d := range domains {
		a := r.saveAttempt(members)
		r.fenceTo(d)
		placed := r.tryGang(g, members)
		r.fenceTo("")
		if placed == len(members) && placed >= g.minCount {
			return
		}
		r.restoreAttempt(a)
	}
	msg := fmt.Sprintf("PodGroup %s is a gang of at least %d pods with an IMEX channel claim: its %d pods in the inputs fit together in no single NVLink domain (tried %s), so none is placed (the gang waits whole, holding no device)",
		g.obj.Name, g.minCount, len(members), strings.Join(domains, ", "))
	if len(members) < g.minCount {
		msg = fmt.Sprintf("PodGroup %s is a gang of at least %d pods and the inputs have %d: none is placed until the rest exist", g.obj.Name, g.minCount, len(members))
	}
	r.gangWaits(g, members, msg)
}

// sharedChannelClaims warns of standalone claims for an IMEX channel that
// several pods share outside a gang: nothing places them together, so
// the first pod scheduled fixes the NVLink domain (its binding allocates
// the claim), even when that domain has no room for the others, which
// then stay Pending while the claim holds its channel.
func (nd *nvlinkDomains) sharedChannelClaims(units []*unit) {
	users := map[*claimEval][]string{}
	var order []*claimEval
	for _, u := range units {
		if u.pod == "" || u.gang != nil && u.gang.minCount > 0 {
			continue
		}
		pod := u.podObj.Obj.(*v1.Pod)
		for _, pc := range pod.Spec.ResourceClaims {
			ce := u.byName[pc.Name]
			if pc.ResourceClaimName == nil || ce == nil {
				continue
			}
			if len(users[ce]) == 0 {
				order = append(order, ce)
			}
			users[ce] = append(users[ce], u.pod)
		}
	}
	for _, ce := range order {
		pods := users[ce]
		if len(pods) < 2 || !nd.asksForChannel(ce) {
			continue
		}
		names := pods
		if len(names) > 4 {
			names = append(append([]string(nil), names[:3]...), "…", names[len(names)-1])
		}
		nd.findings.add(Finding{Kind: FindingChannelWithoutGang, Severity: SeverityWarning, Source: ce.source, Object: ce.object, Field: ce.field + ".devices",
			Message: fmt.Sprintf("claim %s, for an IMEX channel, is shared by %d pods (%s) outside a gang: the first pod scheduled fixes the NVLink domain for all of them, even when that domain has no room for the others, which then stay Pending while the claim holds the channel", ce.info.Name, len(pods), strings.Join(names, ", ")),
			Hint:    "place the pods together: make them one PodGroup with a gang policy and the claim in its resourceClaims (Kubernetes 1.37, topology constraint on " + slicebuilder.NVLinkDomainLabel(nd.opts.DriverName) + "), or admit the job with Kueue TAS at that level (docs/nvlink.md)"})
	}
}
