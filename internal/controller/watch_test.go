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

package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// TestTrimPodKeepsWhereItMayGo: the trimmed pod the accounting reads still
// fits the nodes the full one fits, and is still in its gang.
func TestTrimPodKeepsWhereItMayGo(t *testing.T) {
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "w0", Annotations: map[string]string{"big": "dropped"}},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"pool": "training"},
			Tolerations:     []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{},
			},
		},
	}
	trimmed := trimPod(full)
	if scheduler.NodeConstraintsKey(trimmed) != scheduler.NodeConstraintsKey(full) {
		t.Errorf("node constraints lost in trimming: %q, want %q", scheduler.NodeConstraintsKey(trimmed), scheduler.NodeConstraintsKey(full))
	}
	if scheduler.GangOf(trimmed) != "ml/trainer" {
		t.Errorf("gang lost in trimming: %q", scheduler.GangOf(trimmed))
	}
	if trimmed.Spec.Affinity.PodAntiAffinity != nil || trimmed.Annotations != nil {
		t.Error("trimming kept what the accounting does not read")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "training", "zone": "a"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}}
	if ok, why := scheduler.PodFitsNode(trimmed, node); !ok {
		t.Errorf("the trimmed pod does not fit a node the full one fits: %s", why)
	}
}
