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

	"github.com/gpudra/gpudra/internal/scheduler"
)

// A pod with spec.nodeName is bound by whoever wrote it, never by the
// scheduler, and the scheduler is what allocates claims (and makes the
// claim of DRA-backed extended resources). What happens then, from
// k8s.io/kubernetes 1.37:
//
//   - pkg/controller/resourceclaim creates the pod's claims from their
//     templates, and reserves a claim for the pod only when it is already
//     allocated; nothing allocates it otherwise.
//   - pkg/kubelet/cm/dra (PrepareResources) refuses a claim not reserved
//     for the pod ("is not allowed to use ResourceClaim"), so the pod stays
//     Pending with FailedPrepareDynamicResources events, retried forever.
//   - pkg/kubelet/lifecycle (removeMissingExtendedResources) admits a pod
//     whose extended resource (nvidia.com/gpu) the node does not list, as
//     it does cluster-level resources: the container runs without it. An
//     implicit deviceclass.resource.kubernetes.io/<class> name is not an
//     extended resource there, and the node has none of it: the kubelet
//     rejects the pod (OutOf<name>).
//
// A claim the inputs' scheduled pods share is the one that can work: once
// one of them is scheduled, the claim is allocated and the controller
// reserves it for this pod too, if its devices are on that node.

// scheduledClaimUsers are the ResourceClaims (namespace/name) that a pod
// the scheduler places (no spec.nodeName) uses.
func scheduledClaimUsers(in *scheduler.Manifests) map[string]bool {
	out := map[string]bool{}
	for _, o := range in.Pods {
		pod := o.Obj.(*v1.Pod)
		if pod.Spec.NodeName != "" {
			continue
		}
		for _, pc := range pod.Spec.ResourceClaims {
			if pc.ResourceClaimName != nil {
				out[pod.Namespace+"/"+*pc.ResourceClaimName] = true
			}
		}
	}
	return out
}

// checkNodeName reports what a pod bound by spec.nodeName gets of its
// claims and extended resources, and blocks it where it never starts.
func (ub *unitBuilder) checkNodeName(u *unit, scheduled map[string]bool) {
	o := u.podObj
	pod := o.Obj.(*v1.Pod)
	node := pod.Spec.NodeName
	hint := fmt.Sprintf("drop spec.nodeName and keep the pod on that node with spec.nodeSelector: {kubernetes.io/hostname: %s}: the scheduler then allocates its claims there", node)
	var never, shared []string
	for _, pc := range pod.Spec.ResourceClaims {
		switch {
		case pc.ResourceClaimName != nil && scheduled[pod.Namespace+"/"+*pc.ResourceClaimName]:
			shared = append(shared, "ResourceClaim "+*pc.ResourceClaimName)
		case pc.ResourceClaimName != nil:
			never = append(never, "ResourceClaim "+*pc.ResourceClaimName)
		case pc.ResourceClaimTemplateName != nil:
			never = append(never, fmt.Sprintf("the claim %s made from ResourceClaimTemplate %s", pc.Name, *pc.ResourceClaimTemplateName))
		}
	}
	if len(never) > 0 {
		ub.findings.add(Finding{Kind: FindingNodeNameClaim, Source: o.Source, Object: podObject(o), Field: "spec.nodeName",
			Message: fmt.Sprintf("spec.nodeName binds the pod to %s without the scheduler, and only the scheduler allocates claims: nothing ever allocates %s, and the kubelet refuses to prepare a claim not reserved for the pod (FailedPrepareDynamicResources: the pod is not allowed to use the ResourceClaim); the pod stays Pending",
				node, strings.Join(never, ", ")),
			Hint: hint})
		u.blocked = append(u.blocked, "spec.nodeName bypasses the scheduler, which allocates claims: "+strings.Join(never, ", ")+" is never allocated")
	}
	if len(shared) > 0 {
		ub.findings.add(Finding{Kind: FindingNodeNameClaim, Severity: SeverityWarning, Source: o.Source, Object: podObject(o), Field: "spec.nodeName",
			Message: fmt.Sprintf("spec.nodeName binds the pod to %s without the scheduler: %s is allocated only when a pod the scheduler places is scheduled, and the pod starts only if that allocation is on %s (it is reserved for the pod then); before that, the kubelet refuses to prepare it",
				node, strings.Join(shared, ", "), node),
			Hint: hint})
	}
	// Nothing makes the claim of the pod's extended resources, whether a
	// DeviceClass maps them or not.
	u.ext = ub.sched.ExtendedResources(pod)
	var names []string
	for name := range u.ext.Classes {
		names = append(names, string(name))
	}
	for _, name := range append(u.ext.Unbacked, u.ext.NotEnabled...) {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var implicit, dropped []string
	for _, name := range names {
		if strings.HasPrefix(name, resourceapi.ResourceDeviceClassPrefix) {
			implicit = append(implicit, name)
		} else {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) > 0 {
		ub.findings.add(Finding{Kind: FindingNodeNameClaim, Severity: SeverityWarning, Source: o.Source, Object: podObject(o), Field: "spec.nodeName",
			Message: fmt.Sprintf("spec.nodeName binds the pod to %s without the scheduler, which is what allocates %s through DRA: the kubelet admits a pod whose extended resource the node does not list (as for cluster-level resources), so its containers run without it", node, strings.Join(dropped, ", ")),
			Hint:    hint})
	}
	if len(implicit) > 0 {
		ub.findings.add(Finding{Kind: FindingNodeNameClaim, Source: o.Source, Object: podObject(o), Field: "spec.nodeName",
			Message: fmt.Sprintf("spec.nodeName binds the pod to %s without the scheduler, which is what allocates %s through DRA: the kubelet counts it against the node's allocatable, which has none, and rejects the pod (OutOf%s)", node, strings.Join(implicit, ", "), implicit[0]),
			Hint:    hint})
		u.blocked = append(u.blocked, "spec.nodeName bypasses the scheduler: the kubelet rejects the pod for "+strings.Join(implicit, ", "))
	}
}
