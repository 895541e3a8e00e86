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
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodFitsNode(t *testing.T) {
	dgx := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1", Labels: map[string]string{"kubernetes.io/hostname": "dgx-1", "pool": "training"}}}
	tainted := dgx.DeepCopy()
	tainted.Spec.Taints = []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}}
	preferOnly := dgx.DeepCopy()
	preferOnly.Spec.Taints = []v1.Taint{{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
	cordoned := dgx.DeepCopy()
	cordoned.Spec.Unschedulable = true
	required := func(op v1.NodeSelectorOperator, values ...string) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "pool", Operator: op, Values: values}}}},
		}}}
	}
	tests := []struct {
		name    string
		spec    v1.PodSpec
		node    *v1.Node
		wantErr string // "" when it fits
	}{
		{name: "no constraints", node: dgx},
		{name: "selector matches", spec: v1.PodSpec{NodeSelector: map[string]string{"pool": "training"}}, node: dgx},
		{name: "selector does not match", spec: v1.PodSpec{NodeSelector: map[string]string{"pool": "inference"}}, node: dgx, wantErr: "didn't match Pod's node affinity/selector"},
		{name: "required affinity matches", spec: v1.PodSpec{Affinity: required(v1.NodeSelectorOpIn, "training")}, node: dgx},
		{name: "required affinity does not match", spec: v1.PodSpec{Affinity: required(v1.NodeSelectorOpNotIn, "training")}, node: dgx, wantErr: "node affinity/selector"},
		{name: "untolerated taint", node: tainted, wantErr: "untolerated taint {nvidia.com/gpu: present}"},
		{name: "tolerated taint", spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "nvidia.com/gpu", Operator: v1.TolerationOpExists}}}, node: tainted},
		{name: "PreferNoSchedule does not filter", node: preferOnly},
		{name: "cordoned", node: cordoned, wantErr: "unschedulable"},
		{name: "cordoned, tolerated", spec: v1.PodSpec{Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}, node: cordoned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := PodFitsNode(&v1.Pod{Spec: tc.spec}, tc.node)
			if ok != (tc.wantErr == "") || !strings.Contains(why, tc.wantErr) {
				t.Errorf("PodFitsNode = %v, %q; want fit=%v with %q", ok, why, tc.wantErr == "", tc.wantErr)
			}
		})
	}
}

func TestNodeConstraintsKey(t *testing.T) {
	a := &v1.Pod{Spec: v1.PodSpec{NodeSelector: map[string]string{"pool": "a"}}}
	b := &v1.Pod{Spec: v1.PodSpec{NodeSelector: map[string]string{"pool": "b"}}}
	if NodeConstraintsKey(&v1.Pod{}) != "" {
		t.Error("a pod without node constraints has a key")
	}
	if NodeConstraintsKey(a) == NodeConstraintsKey(b) || NodeConstraintsKey(a) != NodeConstraintsKey(a.DeepCopy()) {
		t.Error("keys do not tell node selectors apart")
	}
}

func TestGangOf(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml"}, Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}}}
	if got := GangOf(p); got != "ml/trainer" {
		t.Errorf("GangOf = %q, want ml/trainer", got)
	}
	if got := GangOf(&v1.Pod{}); got != "" {
		t.Errorf("GangOf of a lone pod = %q", got)
	}
}
