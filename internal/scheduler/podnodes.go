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

package scheduler

import (
	"encoding/json"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// The scheduler places a pod only on a node that its other filters admit
// too; DRA's filter (Schedule) is one of many. These are the ones that
// read the pod and the Node object alone, and that a platform team uses to
// steer GPU work: NodeUnschedulable (cordoned nodes), NodeAffinity
// (nodeSelector and required node affinity) and TaintToleration (NoSchedule
// and NoExecute taints). Filters that need the other pods (resources,
// ports, inter-pod affinity, spread) are not modelled: they depend on the
// node's CPU and memory, which an inventory of ResourceSlices does not
// hold.

// PodFitsNode says whether those filters admit the pod on the node, and if
// not, why, as the scheduler's message says it.
func PodFitsNode(pod *v1.Pod, node *v1.Node) (bool, string) {
	if node.Spec.Unschedulable && !toleratesUnschedulable(pod) {
		return false, "node(s) were unschedulable"
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		return false, fmt.Sprintf("the pod's node affinity is invalid: %v", err)
	}
	if !ok {
		return false, "node(s) didn't match Pod's node affinity/selector"
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(noLog, node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, true)
	if untolerated {
		return false, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
	}
	return true, ""
}

// toleratesUnschedulable: the NodeUnschedulable filter lets a pod that
// tolerates node.kubernetes.io/unschedulable:NoSchedule onto a cordoned
// node.
func toleratesUnschedulable(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	return corev1helpers.TolerationsTolerateTaint(noLog, pod.Spec.Tolerations, taint, true)
}

// noLog is the logger of the toleration helpers: they log only a value
// that is no integer under the Gt and Lt operators, which API validation
// refuses, and such a toleration does not match, as in the scheduler.
var noLog = logr.Discard()

// HasNodeConstraints says whether the pod restricts its nodes beyond DRA:
// a nodeSelector, required node affinity, or tolerations (which only ever
// widen, but make pods that differ in them different).
func HasNodeConstraints(pod *v1.Pod) bool {
	a := pod.Spec.Affinity
	return len(pod.Spec.NodeSelector) > 0 || len(pod.Spec.Tolerations) > 0 ||
		a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
}

// NodeConstraintsKey identifies what PodFitsNode reads of a pod: two pods
// with the same key fit the same nodes.
func NodeConstraintsKey(pod *v1.Pod) string {
	if !HasNodeConstraints(pod) {
		return ""
	}
	var required *v1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, err := json.Marshal(struct {
		Selector    map[string]string `json:"s,omitempty"`
		Required    *v1.NodeSelector  `json:"r,omitempty"`
		Tolerations []v1.Toleration   `json:"t,omitempty"`
	}{pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	if err != nil {
		panic(fmt.Sprintf("marshal node constraints: %v", err)) // API types always marshal
	}
	return string(b)
}

// GangOf returns the PodGroup a pod belongs to ("namespace/name"), or ""
// when it belongs to none: such pods are scheduled all or nothing when the
// group's policy is a gang (Kubernetes 1.37 Workload API, GenericWorkload).
func GangOf(pod *v1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName != "" {
		return pod.Namespace + "/" + *g.PodGroupName
	}
	return ""
}

// UseNodes makes the scheduler try the given Node objects, as the cluster
// has them (labels, taints, cordons), instead of the bare nodes the
// inventory names: each node of the inventory that has a Node object is
// replaced by it. Nodes without ResourceSlices stay out: nothing of a
// driver can be allocated there.
func (s *Scheduler) UseNodes(nodes []*v1.Node) {
	byName := make(map[string]*v1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for i, n := range s.nodes {
		if real, ok := byName[n.Name]; ok {
			s.nodes[i] = real
		}
	}
}
