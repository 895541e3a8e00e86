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

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// PodGroups as the inputs give them (gangs.go says what the scheduler
// does with them): which group a pod is of, the claims a group holds for
// all its pods, how many pods of a workload stand for it, and the order
// in which a pod of a group must list its claims. The runner reads the
// groups (loadPodGroups); unitBuilder makes the units with them.

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
