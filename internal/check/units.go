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
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// unitBuilder turns the inputs' pods, ResourceClaims and
// ResourceClaimTemplates into units, what is allocated at once, and
// checks them as it goes: claims and their requests (claims.go),
// extended resources (extended.go), admin access (admin.go), pods bound
// to a node (nodename.go) and PodGroup claims (gangs.go). It owns the
// claims and templates read so far and who uses them, for one build;
// the classes and selectors it asks evaluator for.
type unitBuilder struct {
	opts       Options
	feats      scheduler.Features
	sched      *scheduler.Scheduler
	inv        *inventory
	report     *Report
	findings   *findingLog
	eval       *evaluator
	known      map[string]scheduler.Object
	namespaces map[string]*v1.Namespace
	// gangs are the inputs' PodGroups by "namespace/name" (gangs.go).
	gangs    map[string]*gangInfo
	progress func(stage string, done, total int)
	// requestMatches are the devices requests match, by class and
	// selectors (requestMatchKey): pods of one workload ask alike.
	requestMatches map[string]*requestMatch

	// claimsByName are the input ResourceClaims by "namespace/name", in
	// claimOrder as read; templates the input templates by
	// "namespace/name", rejectedTemplates those the API server rejects.
	claimsByName      map[string]*claimEval
	claimOrder        []*claimEval
	templates         map[string]scheduler.Object
	rejectedTemplates map[string]bool
	// usedClaims and usedTemplates are those a pod uses: the others are
	// units of their own. users count the pods that share each
	// ResourceClaim, placed or not (replicas past maxReplicas), in order;
	// placed counts a workload's placed replicas.
	usedClaims    map[*claimEval]bool
	usedTemplates map[string]bool
	users         map[*claimEval]int
	placed        map[string]int
}

// sourcedUnit is a unit with where it comes from: units are in the
// order of the inputs.
type sourcedUnit struct {
	src scheduler.Source
	u   *unit
}

// build returns the units of the inputs, in the order of the inputs.
func (ub *unitBuilder) build(in *scheduler.Manifests) []*unit {
	ub.claimsByName, ub.claimOrder = map[string]*claimEval{}, nil
	ub.templates, ub.rejectedTemplates = map[string]scheduler.Object{}, map[string]bool{}
	ub.usedClaims, ub.usedTemplates = map[*claimEval]bool{}, map[string]bool{}
	ub.users, ub.placed = map[*claimEval]int{}, map[string]int{}
	ub.readClaims(in)
	ub.readTemplates(in)
	var units []sourcedUnit
	scheduled := scheduledClaimUsers(in)
	pods := ub.pods(in)
	for i, o := range pods {
		ub.progress("pods evaluated", i, len(pods))
		units = append(units, sourcedUnit{o.Source, ub.podUnit(o, scheduled)})
	}
	ub.progress("pods evaluated", len(pods), len(pods))
	ub.checkClaimUsers(ub.claimOrder, ub.users)
	units = append(units, ub.unusedClaims()...)
	units = append(units, ub.unusedTemplates(in)...)
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i].src, units[j].src
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Document < b.Document
	})
	out := make([]*unit, len(units))
	for i := range units {
		out[i] = units[i].u
	}
	return out
}

// readClaims reads the input ResourceClaims.
func (ub *unitBuilder) readClaims(in *scheduler.Manifests) {
	for _, o := range in.Claims {
		c := o.Obj.(*resourceapi.ResourceClaim)
		ce := ub.newClaim(c.DeepCopy(), "ResourceClaim", o.Source, "ResourceClaim "+o.Name, "spec")
		ce.invalid = ce.invalid || o.Rejected || ub.checkAdminAccess(o, c.Namespace, &c.Spec, "spec")
		ub.claimsByName[o.Name] = ce
		ub.claimOrder = append(ub.claimOrder, ce)
	}
}

// readTemplates reads the input ResourceClaimTemplates: their claims are
// made per pod (podClaims).
func (ub *unitBuilder) readTemplates(in *scheduler.Manifests) {
	for _, o := range in.Templates {
		ub.templates[o.Name] = o
		t := o.Obj.(*resourceapi.ResourceClaimTemplate)
		ub.rejectedTemplates[o.Name] = o.Rejected || ub.checkAdminAccess(o, t.Namespace, &t.Spec.Spec, "spec.spec")
	}
}

// podUnit is a pod's unit: its claims, and what blocks it whatever they
// get.
func (ub *unitBuilder) podUnit(o scheduler.Object, scheduled map[string]bool) *unit {
	pod := o.Obj.(*v1.Pod)
	u := &unit{pod: o.Name, podObj: o, byName: map[string]*claimEval{}, gang: ub.gangOf(pod), group: o.Owner}
	if u.group == "" {
		u.group = "Pod " + o.Name
	}
	order := ub.podClaims(o, u)
	ub.checkContainerClaims(o, pod, u.byName)
	if pod.Spec.NodeName != "" {
		ub.checkNodeName(u, scheduled)
	} else {
		ub.extendedResources(u)
	}
	ub.checkSharedClaimOrder(o, u.gang, order, u.ext.Claim != nil)
	if o.Rejected {
		u.blocked = append(u.blocked, "the API server rejects the "+strings.Fields(o.Owner + " Pod")[0]+" (see the findings): the pod is never created")
	}
	// The replicas check does not place share the claims too.
	if o.Owner != "" && o.Replicas > maxReplicas {
		if ub.placed[o.Source.String()]++; ub.placed[o.Source.String()] == maxReplicas {
			for _, pc := range pod.Spec.ResourceClaims {
				if ce := u.byName[pc.Name]; ce != nil && pc.ResourceClaimName != nil {
					ub.users[ce] += o.Replicas - maxReplicas
				}
			}
		}
	}
	return u
}

// podClaims gives u the claims its pod names (spec.resourceClaims), made
// from templates where it names one, and says in which order the pod
// names shared claims (checkSharedClaimOrder).
func (ub *unitBuilder) podClaims(o scheduler.Object, u *unit) claimOrderCheck {
	pod := o.Obj.(*v1.Pod)
	object := "Pod " + o.Name
	missing := func(kind, name, field string) {
		ub.findings.add(Finding{Kind: FindingMissingClaim, Source: o.Source, Object: object, Field: field,
			Message: fmt.Sprintf("%s %s is not among the inputs; the pod would stay Pending until it exists", kind, name),
			Hint:    "add the file that defines it"})
	}
	order := newClaimOrderCheck()
	for i, pc := range pod.Spec.ResourceClaims {
		field := fmt.Sprintf("spec.resourceClaims[%d]", i)
		order.see(i, pc, u.gang)
		if ce, ok := ub.groupClaim(o, pod, pc, field, ub.templates, ub.claimsByName); ok {
			if ce != nil {
				ub.usedClaims[ce] = true
				if pc.ResourceClaimTemplateName != nil {
					ub.usedTemplates[pod.Namespace+"/"+*pc.ResourceClaimTemplateName] = true
				}
				u.claims = append(u.claims, ce)
				u.byName[pc.Name] = ce
			}
			continue
		}
		switch {
		case pc.ResourceClaimName != nil:
			name := pod.Namespace + "/" + *pc.ResourceClaimName
			ce, ok := ub.claimsByName[name]
			if !ok {
				missing("ResourceClaim", name, field+".resourceClaimName")
				continue
			}
			ub.usedClaims[ce] = true
			u.claims = append(u.claims, ce)
			u.byName[pc.Name] = ce
			if ub.users[ce]++; ub.users[ce] > resourceapi.ResourceClaimReservedForMaxSize {
				u.blocked = append(u.blocked, fmt.Sprintf("ResourceClaim %s is reserved for %d pods already, the most it can be", ce.info.Name, resourceapi.ResourceClaimReservedForMaxSize))
			}
		case pc.ResourceClaimTemplateName != nil:
			name := pod.Namespace + "/" + *pc.ResourceClaimTemplateName
			t, ok := ub.templates[name]
			if !ok {
				missing("ResourceClaimTemplate", name, field+".resourceClaimTemplateName")
				continue
			}
			ub.usedTemplates[name] = true
			claim := scheduler.ClaimFromTemplate(pod, pc.Name, t.Obj.(*resourceapi.ResourceClaimTemplate))
			ce := ub.newClaim(claim, "ResourceClaimTemplate "+name+" for "+object, t.Source, "ResourceClaimTemplate "+name, "spec.spec")
			ce.invalid = ce.invalid || ub.rejectedTemplates[name]
			ce.info.Pod = o.Name
			u.claims = append(u.claims, ce)
			u.byName[pc.Name] = ce
		default:
			ub.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Field: field,
				Message: "names neither resourceClaimName nor resourceClaimTemplateName; the API server rejects the pod"})
		}
	}
	return order
}

// unusedClaims are the units of the ResourceClaims no pod uses: each is
// allocated on its own.
func (ub *unitBuilder) unusedClaims() []sourcedUnit {
	var out []sourcedUnit
	for _, ce := range ub.claimOrder {
		if !ub.usedClaims[ce] {
			out = append(out, sourcedUnit{ce.source, &unit{claims: []*claimEval{ce}}})
		}
	}
	return out
}

// unusedTemplates are the units of the ResourceClaimTemplates no pod
// uses: the claim each would make is allocated on its own.
func (ub *unitBuilder) unusedTemplates(in *scheduler.Manifests) []sourcedUnit {
	var out []sourcedUnit
	for _, o := range in.Templates {
		if ub.usedTemplates[o.Name] {
			continue
		}
		tmpl := o.Obj.(*resourceapi.ResourceClaimTemplate)
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: tmpl.Name},
			Spec:       *tmpl.Spec.Spec.DeepCopy(),
		}
		ce := ub.newClaim(claim, "ResourceClaimTemplate "+o.Name, o.Source, "ResourceClaimTemplate "+o.Name, "spec.spec")
		ce.invalid = ce.invalid || ub.rejectedTemplates[o.Name]
		out = append(out, sourcedUnit{o.Source, &unit{claims: []*claimEval{ce}}})
	}
	return out
}

// maxReplicas caps the pods of one workload that check places.
const maxReplicas = 64

// checkClaimUsers reports the ResourceClaims more pods share than a claim
// can be reserved for: the scheduler reserves the claim for each pod it
// binds (status.reservedFor), which the API server holds to
// ResourceClaimReservedForMaxSize entries, so the pods past it fail to
// bind and are retried forever (pkg/apis/resource/validation).
func (ub *unitBuilder) checkClaimUsers(claims []*claimEval, users map[*claimEval]int) {
	const most = resourceapi.ResourceClaimReservedForMaxSize
	for _, ce := range claims {
		n := users[ce]
		if n <= most {
			continue
		}
		ub.findings.add(Finding{Kind: FindingTooManyClaimUsers, Source: ce.source, Object: ce.object,
			Message: fmt.Sprintf("%d pods share %s, but a claim is reserved for at most %d pods at once (status.reservedFor, which the scheduler fills as it binds them): the other %d are never scheduled while the first %d run", n, ce.info.Name, most, n-most, most),
			Hint:    fmt.Sprintf("split the pods over several ResourceClaims, at most %d each, or give each pod its own claim (resourceClaimTemplateName)", most)})
	}
}

// pods are the input pods, defaulted as the API server does. A workload
// stands for all the pods it asks for (up to maxReplicas, and a warning
// beyond), named <workload>-0, -1, …: its replicas run at the same time,
// so they are placed together, each seeing what the others hold, even
// without --sequential.
func (ub *unitBuilder) pods(in *scheduler.Manifests) []scheduler.Object {
	var out []scheduler.Object
	for _, o := range in.Pods {
		n := 1
		if o.Owner != "" {
			n = min(o.Replicas, maxReplicas)
			if o.Replicas > maxReplicas {
				ub.findings.add(Finding{Kind: FindingSkipped, Severity: SeverityWarning, Source: o.Source, Object: o.Owner,
					Message: fmt.Sprintf("%d replicas: check places the first %d, and not the other %d", o.Replicas, maxReplicas, o.Replicas-maxReplicas),
					Hint:    "the replicas are alike: if the first ones fit, more of them fit only where there are more devices; check a copy with fewer replicas on a larger inventory (--nodes) to see how many fit"})
			}
		} else if k, gang := ub.gangReplicas(o); gang {
			n = k
		}
		for i := range n {
			pod := o.Obj.(*v1.Pod).DeepCopy()
			if i > 0 {
				pod.Name = strings.TrimSuffix(pod.Name, "-0") + fmt.Sprintf("-%d", i)
			}
			scheduler.DefaultPod(pod)
			c := o
			c.Obj, c.Name = pod, pod.Namespace+"/"+pod.Name
			out = append(out, c)
		}
	}
	return out
}
