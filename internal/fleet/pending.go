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

package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// pendingPod is one waiting pod: all its claims (those allocated already,
// shared with a running pod, restrict it to their nodes), and the key of
// its shape.
type pendingPod struct {
	pod    string
	obj    *corev1.Pod
	claims []*resourceapi.ResourceClaim
	shape  string
	// gang is the pod's PodGroup ("namespace/name") when the group is a
	// gang; "" for a pod scheduled on its own.
	gang string
	// nodes restricts the pod to the nodes its allocated claims are
	// available on.
	nodes []*nodeaffinity.NodeSelector
}

// fitsNode reports whether the pod's allocated claims and the
// scheduler's node filters allow the node.
func (p pendingPod) fitsNode(node *corev1.Node) bool {
	for _, s := range p.nodes {
		if !s.Match(node) {
			return false
		}
	}
	ok, _ := scheduler.PodFitsNode(p.obj, node)
	return ok
}

// groupShapes groups the lone pods by shape, in the order each shape is
// first met: pods that ask for the same thing are asked about once.
func groupShapes(lone []pendingPod) (map[string][]pendingPod, []string) {
	shapes := map[string][]pendingPod{}
	var order []string
	for _, p := range lone {
		if _, seen := shapes[p.shape]; !seen {
			order = append(order, p.shape)
		}
		shapes[p.shape] = append(shapes[p.shape], p)
	}
	return shapes, order
}

// pendingPods are the pods waiting for this driver's devices, each with
// the claims the scheduler would allocate together.
func pendingPods(in Inputs, sched *scheduler.Scheduler) []pendingPod {
	ours := driverClasses(in.DriverName, in.Classes)
	claims := map[string]*resourceapi.ResourceClaim{}
	for _, c := range in.Claims {
		claims[c.Namespace+"/"+c.Name] = c
	}
	gangs, groupClaims := podGroups(in.PodGroups)
	var out []pendingPod
	for _, pod := range in.Pods {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		generated := map[string]string{}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				generated[s.Name] = *s.ResourceClaimName
			}
		}
		var podClaims []*resourceapi.ResourceClaim
		waits, complete := false, true
		for _, rc := range pod.Spec.ResourceClaims {
			name := generated[rc.Name]
			if rc.ResourceClaimName != nil {
				name = *rc.ResourceClaimName
			}
			if n := groupClaims[scheduler.GangOf(pod)+"/"+rc.Name]; n != "" && rc.ResourceClaimName == nil {
				name = n // the claim made for the pod's PodGroup
			}
			c, ok := claims[pod.Namespace+"/"+name]
			if name == "" || !ok {
				complete = false // the claim is not created yet
				continue
			}
			podClaims = append(podClaims, c)
			if c.Status.Allocation == nil && requestsClass(c, ours) {
				waits = true
			}
		}
		if pod.Status.ExtendedResourceClaimStatus == nil {
			p := pod.DeepCopy()
			scheduler.DefaultPod(p)
			if ext := sched.ExtendedResources(p); ext.Claim != nil && requestsClass(ext.Claim, ours) {
				podClaims = append(podClaims, ext.Claim)
				waits = true
			}
		}
		if !waits || !complete {
			continue
		}
		p := pendingPod{pod: pod.Namespace + "/" + pod.Name, obj: pod, claims: podClaims,
			shape: shapeOf(podClaims) + scheduler.NodeConstraintsKey(pod)}
		if g := scheduler.GangOf(pod); gangs[g] > 0 {
			p.gang = g
		}
		for _, c := range podClaims {
			if c.Status.Allocation != nil && c.Status.Allocation.NodeSelector != nil {
				if sel, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector); err == nil {
					p.nodes = append(p.nodes, sel)
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// shapeOf keys what a pod asks for: the specs of its unallocated claims and
// the allocations of the others.
func shapeOf(claims []*resourceapi.ResourceClaim) string {
	type part struct {
		Spec       *resourceapi.ResourceClaimSpec `json:"spec,omitempty"`
		Allocation *resourceapi.AllocationResult  `json:"allocation,omitempty"`
	}
	parts := make([]part, len(claims))
	for i, c := range claims {
		if c.Status.Allocation != nil {
			parts[i].Allocation = c.Status.Allocation
		} else {
			parts[i].Spec = &c.Spec
		}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		panic(fmt.Sprintf("marshal claim specs: %v", err)) // API types always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// podGroups reads the PodGroups: the minCount of each gang
// ("namespace/name"), and the claims made for PodGroups, by
// "namespace/group/claim" (the name pods and the group use for it).
func podGroups(groups []*schedulingv1beta1.PodGroup) (map[string]int, map[string]string) {
	gangs, claims := map[string]int{}, map[string]string{}
	for _, g := range groups {
		key := g.Namespace + "/" + g.Name
		if gang := g.Spec.SchedulingPolicy.Gang; gang != nil {
			gangs[key] = max(int(gang.MinCount), 1)
		}
		for _, st := range g.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				claims[key+"/"+st.Name] = *st.ResourceClaimName
			}
		}
	}
	return gangs, claims
}

// splitGangs separates the pods that wait on their own from the gangs'
// waiting pods (by gang, in the order first seen).
func splitGangs(pods []pendingPod) (lone []pendingPod, gangs map[string][]pendingPod, order []string) {
	gangs = map[string][]pendingPod{}
	for _, p := range pods {
		if p.gang == "" {
			lone = append(lone, p)
			continue
		}
		if _, seen := gangs[p.gang]; !seen {
			order = append(order, p.gang)
		}
		gangs[p.gang] = append(gangs[p.gang], p)
	}
	return lone, gangs, order
}
