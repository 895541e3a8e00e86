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
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/utils/ptr"

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

// gangInfo is one PodGroup of the inputs.
type gangInfo struct {
	obj      scheduler.Object
	minCount int // 0: not a gang (the basic policy)
	// claims are the group's shared claims, by the name pods use.
	claims map[string]*claimEval
}

// loadPodGroups reads the inputs' PodGroups, with a note on what a
// cluster of the checked version does with them.
func (r *runner) loadPodGroups(in *scheduler.Manifests) {
	r.gangs = map[string]*gangInfo{}
	for _, o := range in.PodGroups {
		pg := o.Obj.(*schedulingv1beta1.PodGroup)
		g := &gangInfo{obj: o, claims: map[string]*claimEval{}}
		if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
			g.minCount = max(int(gang.MinCount), 1)
		}
		r.gangs[o.Name] = g
		// A v1alpha3 PodGroup is read as v1beta1 and keeps its version
		// here (scheduler.Manifests).
		gv := pg.APIVersion
		if gv == "" {
			gv = schedulingv1beta1.SchemeGroupVersion.String()
		}
		// Versions are "1.34" … "1.37" (scheduler.KubernetesVersions):
		// they compare as strings.
		if r.feats.Version < "1.37" {
			r.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: "PodGroup " + o.Name, Field: "apiVersion",
				Message: fmt.Sprintf("Kubernetes %s does not serve %s (the Workload API's v1alpha3 and v1beta1 come with 1.37); the API server rejects the PodGroup, and its pods are scheduled one by one", r.feats.Version, gv),
				Hint:    workloadAPIAt(r.feats.Version)})
			continue
		}
		r.findings.add(Finding{Kind: FindingNotApplied, Severity: SeverityNote, Source: o.Source, Object: "PodGroup " + o.Name,
			Message: fmt.Sprintf("Kubernetes %s serves PodGroups only with the GenericWorkload feature gate and the %s API enabled (both off by default), and PodGroup claims only with DRAWorkloadResourceClaims; checked as on a cluster that enables them", r.feats.Version, gv)})
	}
}

// workloadAPIAt says which Workload API (PodGroup, Workload) a release
// serves, and behind what (k8s.io/kubernetes pkg/features GenericWorkload,
// alpha from 1.35, beta but off in 1.37; pkg/controlplane/instance.go: the
// alpha and beta scheduling.k8s.io versions are off by default).
func workloadAPIAt(version string) string {
	switch version {
	case "1.34":
		return "Kubernetes 1.34 has no Workload API: a gang needs a scheduler plugin (e.g. Kueue, or the coscheduling plugin of scheduler-plugins)"
	case "1.35":
		return "Kubernetes 1.35 serves the Workload API only as scheduling.k8s.io/v1alpha1, a Workload with its pod groups inline (no PodGroup kind), with the GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1alpha1=true (both off by default)"
	case "1.36":
		return "Kubernetes 1.36 serves PodGroup and Workload only as scheduling.k8s.io/v1alpha2, with the GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1alpha2=true (both off by default), and PodGroup claims only with DRAWorkloadResourceClaims"
	}
	return "Kubernetes " + version + " serves PodGroup and Workload as scheduling.k8s.io/v1beta1 (and v1alpha3), with the GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1beta1=true (both off by default)"
}

// gangOf returns the pod's PodGroup among the inputs, or nil.
func (ub *unitBuilder) gangOf(pod *v1.Pod) *gangInfo {
	if ub.feats.Version < "1.37" {
		return nil
	}
	return ub.gangs[scheduler.GangOf(pod)]
}

// groupClaim returns the claim a pod's claim entry stands for when its
// PodGroup holds a claim of that name: made once for the group, from the
// template the group names. The pod's entry must match the group's
// exactly, as the resourceclaim controller requires.
func (ub *unitBuilder) groupClaim(o scheduler.Object, pod *v1.Pod, pc v1.PodResourceClaim, field string, templates map[string]scheduler.Object, claims map[string]*claimEval) (*claimEval, bool) {
	g := ub.gangOf(pod)
	if g == nil {
		return nil, false
	}
	pg := g.obj.Obj.(*schedulingv1beta1.PodGroup)
	for i, gc := range pg.Spec.ResourceClaims {
		if gc.Name != pc.Name {
			continue
		}
		if !ptr.Equal(gc.ResourceClaimName, pc.ResourceClaimName) || !ptr.Equal(gc.ResourceClaimTemplateName, pc.ResourceClaimTemplateName) {
			ub.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: "Pod " + o.Name, Field: field,
				Message: fmt.Sprintf("the pod's claim %s differs from the one of that name in PodGroup %s (spec.resourceClaims[%d]); the resourceclaim controller gives the pod no claim, and it stays Pending", pc.Name, g.obj.Name, i),
				Hint:    "name the same ResourceClaim or ResourceClaimTemplate as the PodGroup"})
			return nil, true
		}
		if ce, ok := g.claims[pc.Name]; ok {
			return ce, true
		}
		var ce *claimEval
		switch {
		case gc.ResourceClaimName != nil:
			ce = claims[pod.Namespace+"/"+*gc.ResourceClaimName]
		case gc.ResourceClaimTemplateName != nil:
			t, ok := templates[pod.Namespace+"/"+*gc.ResourceClaimTemplateName]
			if !ok {
				return nil, false // the caller reports the missing template
			}
			owner := &v1.Pod{}
			owner.Namespace, owner.Name = pg.Namespace, pg.Name
			claim := scheduler.ClaimFromTemplate(owner, pc.Name, t.Obj.(*resourceapi.ResourceClaimTemplate))
			ce = ub.newClaim(claim, "ResourceClaimTemplate "+t.Name+" for PodGroup "+g.obj.Name, t.Source, "ResourceClaimTemplate "+t.Name, "spec.spec")
		}
		if ce == nil {
			return nil, false
		}
		g.claims[pc.Name] = ce
		return ce, true
	}
	return nil, false
}

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

// gangReplicas is how many pods of a workload check places: all of a
// gang's (up to maxReplicas), since the gang is placed whole.
func (ub *unitBuilder) gangReplicas(o scheduler.Object) (int, bool) {
	if o.Owner == "" || o.Replicas <= 1 {
		return 1, false
	}
	if g := ub.gangOf(o.Obj.(*v1.Pod)); g == nil || g.minCount == 0 {
		return 1, false
	}
	if o.Replicas > maxReplicas {
		ub.findings.add(Finding{Kind: FindingSkipped, Severity: SeverityNote, Source: o.Source, Object: o.Owner,
			Message: fmt.Sprintf("%d replicas: the first %d of the gang are placed", o.Replicas, maxReplicas)})
	}
	return min(o.Replicas, maxReplicas), true
}

// claimOrderCheck notes, over a pod's spec.resourceClaims in order, the
// first claim the pod shares with its group and the last claim of its
// own.
//
// Why the order matters: in kube-scheduler 1.37's pod-group cycle the
// first pod of a group allocates every claim, and the later pods reuse
// the allocations still pending for the claims they share. The
// DynamicResources plugin's Filter hands Reserve the allocator's results
// for the pod's own claims followed by the reused ones, while Reserve
// assigns them to the pod's unallocated claims in spec order. A shared
// claim listed before one of the pod's own thus swaps the two: the own
// claim gets the shared claim's devices (a pod placed with no GPUs of
// its own, two workers on one tray), and PreBind then fails on the
// shared claim ("got allocated elsewhere"), so the gang binds in part
// or not at all. Listed after them, the results line up.
type claimOrderCheck struct {
	firstShared, lastOwn int // indexes into spec.resourceClaims, -1: none
	sharedName, ownName  string
}

// newClaimOrderCheck is a check that has seen no claim yet.
func newClaimOrderCheck() claimOrderCheck {
	return claimOrderCheck{firstShared: -1, lastOwn: -1}
}

// see records entry i of the pod's claims.
func (c *claimOrderCheck) see(i int, pc v1.PodResourceClaim, g *gangInfo) {
	if g == nil {
		return
	}
	shared := pc.ResourceClaimName != nil // a standalone claim may be any pod's
	for _, gc := range g.obj.Obj.(*schedulingv1beta1.PodGroup).Spec.ResourceClaims {
		shared = shared || gc.Name == pc.Name
	}
	switch {
	case shared && c.firstShared < 0:
		c.firstShared, c.sharedName = i, pc.Name
	case !shared && pc.ResourceClaimTemplateName != nil:
		c.lastOwn, c.ownName = i, pc.Name
	}
}

// checkSharedClaimOrder reports a pod of a PodGroup that lists a claim
// its group shares before a claim of its own (claimOrderCheck says why).
// The claim kube-scheduler makes for extended resources that a
// DeviceClass maps (extended: the pod asks for some) always comes after
// the pod's listed claims, so it cannot come before a shared one.
func (ub *unitBuilder) checkSharedClaimOrder(o scheduler.Object, g *gangInfo, c claimOrderCheck, extended bool) {
	if g == nil || c.firstShared < 0 {
		return
	}
	f := Finding{Kind: FindingSharedClaimFirst, Source: o.Source, Object: "Pod " + o.Name,
		Field: fmt.Sprintf("spec.resourceClaims[%d]", c.firstShared)}
	switch {
	case c.lastOwn > c.firstShared:
		f.Message = fmt.Sprintf("claim %s, which the pods of PodGroup %s share, is listed before the pod's own claim %s (spec.resourceClaims[%d]); "+
			"kube-scheduler %s then swaps their allocations for every pod of the group but the first, and the group binds in part or waits",
			c.sharedName, g.obj.Name, c.ownName, c.lastOwn, ub.feats.Version)
		f.Hint = "list the claims the group shares after the pod's own claims in spec.resourceClaims (containers name claims, so the order changes nothing else)"
	case extended:
		f.Message = fmt.Sprintf("claim %s, which the pods of PodGroup %s share, comes before the claim kube-scheduler makes for the pod's extended resources (always last); "+
			"kube-scheduler %s then swaps their allocations for every pod of the group but the first, and the group binds in part or waits",
			c.sharedName, g.obj.Name, ub.feats.Version)
		f.Hint = "ask for the devices with a ResourceClaimTemplate listed before the group's claims, not with extended resources"
	default:
		return
	}
	ub.findings.add(f)
}
