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
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// Gangs and node constraints: what the scheduler does with a pod besides
// allocating its claims.
//
//   - A pod goes only to nodes its nodeSelector, required node affinity and
//     tolerations admit (scheduler.PodFitsNode), on the Node objects among
//     the inputs; nodes without one are the inventory's bare nodes, which
//     carry only kubernetes.io/hostname.
//   - The pods of a PodGroup with a gang policy (Kubernetes 1.37 Workload
//     API) are placed together, each seeing what the gang's earlier pods
//     took, or not at all: when one does not fit, none is placed. A
//     workload whose pod template names such a group stands for all its
//     pods (up to maxReplicas), not one.
//   - A pod claim that matches one of its PodGroup's resourceClaims is one
//     claim for the whole group, allocated once (DRAWorkloadResourceClaims).

// fitsNodes says whether a node of the inventory admits the pod; if none
// does, why not (on the first node).
func (r *runner) fitsNodes(pod *v1.Pod) (bool, string) {
	why := ""
	for _, n := range r.sched.Nodes() {
		ok, reason := scheduler.PodFitsNode(pod, n)
		if ok {
			return true, ""
		}
		if why == "" {
			why = reason
		}
	}
	hint := ""
	if len(r.nodeObjs) == 0 {
		hint = " (the inventory's nodes carry only kubernetes.io/hostname; add Node manifests with the labels and taints of your GPU nodes to the inputs)"
	}
	return false, fmt.Sprintf("no node of the inventory admits the pod: %s%s", why, hint)
}

// noNodeFinding reports a pod that no node of the inventory admits: the
// pod stays Pending, so the report must say why in a finding, not only
// in the claim's reasons. Without Node manifests the inventory's nodes
// carry no labels or taints, so check cannot tell whether the cluster's
// nodes admit the pod: a warning then, an error when the inputs give
// the nodes.
func (r *runner) noNodeFinding(u *unit, why string) {
	pod := u.podObj.Obj.(*v1.Pod)
	field := "spec"
	switch {
	case len(pod.Spec.NodeSelector) > 0:
		field = "spec.nodeSelector"
	case pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil:
		field = "spec.affinity.nodeAffinity"
	case len(pod.Spec.Tolerations) > 0:
		field = "spec.tolerations"
	}
	f := Finding{Kind: FindingUnsatisfiable, Source: u.podObj.Source, Object: "Pod " + u.pod, Field: field,
		Message: fmt.Sprintf("pod %s stays Pending: %s", u.pod, why)}
	if len(r.nodeObjs) == 0 {
		f.Severity = SeverityWarning
		f.Message = fmt.Sprintf("pod %s stays Pending on this inventory: %s", u.pod, why)
	} else {
		f.Hint = "give the pod a nodeSelector, node affinity and tolerations that one of the Node manifests admits, or add the Node the pod is meant for"
	}
	if owner := u.podObj.Owner; owner != "" {
		f.Object = owner
		r.pending.add(owner+"\x00nodes", u.pod, f)
		return
	}
	r.findings.add(f)
}

// allocateAll allocates the units in order; the pods of a gang are
// allocated together when the first of them comes.
func (r *runner) allocateAll(units []*unit) {
	byGang := map[*gangInfo][]*unit{}
	for _, u := range units {
		if u.gang != nil && u.gang.minCount > 0 {
			byGang[u.gang] = append(byGang[u.gang], u)
		}
	}
	done := map[*gangInfo]bool{}
	for i, u := range units {
		r.progress("pods placed", i, len(units))
		g := u.gang
		if g == nil || g.minCount == 0 {
			r.allocate(u)
			continue
		}
		if !done[g] {
			done[g] = true
			r.allocateGang(g, byGang[g])
		}
	}
	r.progress("pods placed", len(units), len(units))
}

// allocateGang places a gang's pods one after the other on one state, and
// takes every allocation back when one pod does not fit, or when fewer
// pods than minCount are there to place.
func (r *runner) allocateGang(g *gangInfo, members []*unit) {
	r.nvlink.checkGangTopology(g, members)
	if domains := r.nvlink.gangDomains(members); domains != nil {
		r.allocateGangInDomains(g, members, domains)
		return
	}
	before := r.saveAttempt(members)
	placed := r.tryGang(g, members)
	if placed == len(members) && placed >= g.minCount {
		return
	}
	msg := fmt.Sprintf("PodGroup %s is a gang of at least %d pods: %d of the %d pods in the inputs fit together, so none is placed (the gang waits whole, holding no device)", g.obj.Name, g.minCount, placed, len(members))
	if len(members) < g.minCount {
		msg = fmt.Sprintf("PodGroup %s is a gang of at least %d pods and the inputs have %d: none is placed until the rest exist", g.obj.Name, g.minCount, len(members))
	} else if nodes := r.gangFitsWithFleetSpares(g, members, before); nodes != nil {
		r.gangWaitsForFleetSpares(g, members, nodes)
		return
	} else if r.gangFitsWithRefill(g, members, before) {
		r.gangWaitsForSpares(g, members, placed)
		return
	}
	r.gangWaits(g, members, msg)
}

// gangFitsWithFleetSpares says on which nodes the gang, which does not
// fit on what the nodes publish now, would fit once gpudra-controller
// gave each of its pods that fits nowhere a spare on a node of its own,
// as the controller gives a gang it starts (internal/migspares, Waiting
// .Gang); nil when it would not, or when no controller gives spares
// (Options.Spare unset: not fleet mode). before is the attempt saved
// before the gang was first tried; everything the try changes is put
// back.
func (r *runner) gangFitsWithFleetSpares(g *gangInfo, members []*unit, before *attempt) []string {
	if r.opts.Spare == nil {
		return nil
	}
	after, findings := r.saveAttempt(members), slices.Clone(r.report.Findings)
	state, held, published := r.state.Clone(), slices.Clone(r.prep.held), r.pub.save()
	r.restoreAttempt(before)
	r.pub.flush()
	r.gangSpares = &gangSpares{given: map[string][]*resourceapi.ResourceSlice{}}
	placed := r.tryGang(g, members)
	spares := r.gangSpares
	r.gangSpares = nil
	for _, node := range spares.order {
		r.sched.ReplaceNodeSlices(node, spares.given[node])
	}
	r.state, r.prep.held = state, held
	r.pub.restore(published)
	if placed < len(members) || placed < g.minCount || len(spares.order) == 0 {
		r.restoreAttempt(after)
		r.report.Findings = findings
		return nil
	}
	// The gang waits for the spares, not for devices others hold: what
	// the first try found about its pods goes (the caller says it waits).
	r.restoreAttempt(before)
	return spares.order
}

// gangSpares are the spares given to a gang's pods while
// gangFitsWithFleetSpares tries it: the nodes in the order given, and
// their slices before.
type gangSpares struct {
	order []string
	given map[string][]*resourceapi.ResourceSlice
}

// giveGangSpare gives one of a gang's pods, whose claims fit nowhere, a
// spare on a node that has none yet, as gpudra-controller would, and
// places it there: the placement, or nil when no node lets it in.
func (r *runner) giveGangSpare(pod *v1.Pod, claims []*resourceapi.ResourceClaim) *scheduler.Placement {
	node, before, place := r.spareNodeFor(pod, claims, func(n string) bool {
		_, given := r.gangSpares.given[n]
		return given
	})
	if place != nil {
		r.gangSpares.order = append(r.gangSpares.order, node)
		r.gangSpares.given[node] = before
	}
	return place
}

// gangWaitsForFleetSpares reports a gang that fits once gpudra-controller
// gives its nodes spares: Pending until it does, a warning.
func (r *runner) gangWaitsForFleetSpares(g *gangInfo, members []*unit, nodes []string) {
	shown := nodes
	if len(shown) > 4 {
		shown = shown[:4]
	}
	where := strings.Join(shown, ", ")
	if len(nodes) > len(shown) {
		where += fmt.Sprintf(" and %d more", len(nodes)-len(shown))
	}
	r.gangWaitsAs(g, members, Finding{Kind: FindingWaitsForSpare, Severity: SeverityWarning,
		Message: fmt.Sprintf("PodGroup %s is a gang of at least %d pods that fits on no node's published MIG placements now, and fits once gpudra-controller gives %d node(s) a MIG spare (%s), as it gives a gang it starts a node for each pod that fits nowhere: the gang is Pending until the controller does, a recompute and a republish later (docs/mig.md, Spares across the fleet)",
			g.obj.Name, g.minCount, len(nodes), where),
		Hint: "to have the spares there beforehand, set the plugin's --mig-spare-gpus (chart migSpareGPUs) to the gang's partitions per node on that node pool"})
}

// tryGang places a gang's pods one after the other on one state and says
// how many got all their claims; when not all did, or fewer than
// minCount are there, the scheduler's state (what the nodes' plugins
// hold, and what they republished for it) is taken back.
func (r *runner) tryGang(g *gangInfo, members []*unit) int {
	saved, savedHeld, savedPublished, sequential := r.state.Clone(), slices.Clone(r.prep.held), r.pub.save(), r.opts.Sequential
	if !sequential {
		r.resetState()
	}
	r.opts.Sequential = true
	// A gang binds whole, before any of its claims is prepared: its pods
	// see what the nodes publish now, not what they republish after a
	// prepare (republish.go), unless gangFitsWithRefill asks.
	r.inGang = true
	for _, u := range members {
		r.allocate(u)
	}
	r.inGang = false
	r.opts.Sequential = sequential
	r.group = "" // the next unit starts afresh (without --sequential)
	placed := 0
	for _, u := range members {
		if r.unitAllocated(u) {
			placed++
		}
	}
	if placed == len(members) && placed >= g.minCount {
		return placed
	}
	r.state, r.prep.held = saved, savedHeld
	r.pub.restore(savedPublished)
	return placed
}

// gangWaits reports a gang that is not placed: none of its claims holds a
// device, each says why.
func (r *runner) gangWaits(g *gangInfo, members []*unit, msg string) {
	r.gangWaitsAs(g, members, Finding{Kind: FindingUnsatisfiable, Message: msg})
}

// gangWaitsAs is gangWaits with the finding f says.
func (r *runner) gangWaitsAs(g *gangInfo, members []*unit, f Finding) {
	msg := f.Message
	for _, u := range members {
		for _, ce := range r.unitClaims(u) {
			ci := &r.report.Claims[ce.idx]
			if ci.Allocation != nil {
				ci.Allocation = nil
				ce.claim.Status.Allocation = nil
			}
			ci.PrepareFails = "" // never allocated, never prepared
			ci.Unsatisfiable = append(ci.Unsatisfiable, msg)
			ce.done = true
		}
	}
	f.Source, f.Object, f.Field = g.obj.Source, "PodGroup "+g.obj.Name, "spec.schedulingPolicy.gang.minCount"
	r.findings.add(f)
}

// unitClaims are a unit's claims, with the one for its extended resources.
func (r *runner) unitClaims(u *unit) []*claimEval {
	if u.extended == nil {
		return u.claims
	}
	return append(u.claims[:len(u.claims):len(u.claims)], u.extended)
}

// unitAllocated says whether every claim of the unit got devices and the
// pod is not blocked.
func (r *runner) unitAllocated(u *unit) bool {
	if len(u.blocked) > 0 {
		return false
	}
	for _, ce := range r.unitClaims(u) {
		if r.report.Claims[ce.idx].Allocation == nil {
			return false
		}
	}
	return len(u.claims) == len(u.podObj.Obj.(*v1.Pod).Spec.ResourceClaims)
}
