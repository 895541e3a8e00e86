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
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// labelled is a Ready, schedulable node with labels and taints.
func labelled(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	n := node(name, true, true)
	n.Labels = map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = taints
	return n
}

// member is a waiting pod of the PodGroup group.
func member(name, group string, claims ...string) *corev1.Pod {
	p := unscheduled(name, claims...)
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return p
}

func gang(name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

// TestStrandedNodeConstraints: a free GPU on a node no waiting pod may go
// to (node selector, required affinity, taints) is stranded; a gang that
// cannot be placed whole is one unsatisfiable workload.
func TestStrandedNodeConstraints(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	base := func() Inputs {
		return Inputs{
			DriverName: driver, Now: now,
			Slices: []*resourceapi.ResourceSlice{islandNode("node-a"), islandNode("node-b")},
			Nodes: []*corev1.Node{
				labelled("node-a", map[string]string{"pool": "training"}),
				labelled("node-b", map[string]string{"pool": "inference"}, gpuTaint),
			},
			Classes: []*resourceapi.DeviceClass{gpuClass()},
			// node-a: 4 free (island 4); node-b: 8 free.
			Claims: []*resourceapi.ResourceClaim{holding("run-a", "node-a", 0, 1, 2, 3)},
		}
	}
	ones := func(n int) []*resourceapi.ResourceClaim {
		var out []*resourceapi.ResourceClaim
		for i := range n {
			out = append(out, want(fmt.Sprintf("one-%d", i), 1, false))
		}
		return out
	}
	withPods := func(in Inputs, claims []*resourceapi.ResourceClaim, pods ...*corev1.Pod) Inputs {
		in.Claims = append(in.Claims, claims...)
		in.Pods = append(in.Pods, pods...)
		return in
	}
	tolerant := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		return p
	}
	selecting := func(p *corev1.Pod, pool string) *corev1.Pod {
		p.Spec.NodeSelector = map[string]string{"pool": pool}
		return p
	}
	for _, tc := range []struct {
		name                         string
		in                           Inputs
		stranded                     map[GPUKey]int
		pending, unsatisfiable       int
		workloads, unsatisfiableLoad int
	}{
		{
			name:     "the taint keeps an intolerant pod off node-b: its 8 GPUs are stranded",
			in:       withPods(base(), ones(1), unscheduled("p", "one-0")),
			stranded: map[GPUKey]int{{"node-b", h100}: 8},
			pending:  1, workloads: 1,
		},
		{
			name:     "a tolerating pod may use both nodes",
			in:       withPods(base(), ones(1), tolerant(unscheduled("p", "one-0"))),
			stranded: map[GPUKey]int{},
			pending:  1, workloads: 1,
		},
		{
			name:     "a node selector for the inference pool strands node-a's free GPUs",
			in:       withPods(base(), ones(1), tolerant(selecting(unscheduled("p", "one-0"), "inference"))),
			stranded: map[GPUKey]int{{"node-a", h100}: 4},
			pending:  1, workloads: 1,
		},
		{
			name: "required node affinity that no node meets: unsatisfiable, everything stranded",
			in: withPods(base(), ones(1), func() *corev1.Pod {
				p := tolerant(unscheduled("p", "one-0"))
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"batch"}}}}}}}}
				return p
			}()),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 8},
			pending:  1, unsatisfiable: 1, workloads: 1, unsatisfiableLoad: 1,
		},
		{
			// Each of the eight fits node-a alone (4 free), but not all
			// eight: the gang is one workload that cannot be placed, and
			// nothing waiting can use node-a's free GPUs.
			name: "a gang of 8 with room for 4 is one unsatisfiable workload",
			in: func() Inputs {
				in := base()
				in.PodGroups = []*schedulingv1beta1.PodGroup{gang("trainer", 8)}
				var pods []*corev1.Pod
				for i := range 8 {
					pods = append(pods, member(fmt.Sprintf("w%d", i), "trainer", fmt.Sprintf("one-%d", i)))
				}
				return withPods(in, ones(8), pods...)
			}(),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 8},
			pending:  8, unsatisfiable: 8, workloads: 1, unsatisfiableLoad: 1,
		},
		{
			name: "a tolerating gang of 8 fits across both nodes",
			in: func() Inputs {
				in := base()
				in.PodGroups = []*schedulingv1beta1.PodGroup{gang("trainer", 8)}
				var pods []*corev1.Pod
				for i := range 8 {
					pods = append(pods, tolerant(member(fmt.Sprintf("w%d", i), "trainer", fmt.Sprintf("one-%d", i))))
				}
				return withPods(in, ones(8), pods...)
			}(),
			// First fit: node-a's 4, then 4 of node-b; node-b's other 4
			// are stranded (nothing else waits).
			stranded: map[GPUKey]int{{"node-b", h100}: 4},
			pending:  8, workloads: 1,
		},
		{
			// One claim for the PodGroup, eight GPUs on one island: only
			// node-b has an island of eight free... islands are of four
			// here, so it fits nowhere.
			name: "a PodGroup claim for 8 on one island, islands of 4",
			in: func() Inputs {
				in := base()
				pg := gang("island", 2)
				pg.Status.ResourceClaimStatuses = []schedulingv1beta1.PodGroupResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("island-gpus")}}
				in.PodGroups = []*schedulingv1beta1.PodGroup{pg}
				shared := want("island-gpus", 8, true)
				a, b := tolerant(member("r0", "island")), tolerant(member("r1", "island"))
				for _, p := range []*corev1.Pod{a, b} {
					p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("island-8gpu")}}
				}
				return withPods(in, []*resourceapi.ResourceClaim{shared}, a, b)
			}(),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 8},
			pending:  2, unsatisfiable: 2, workloads: 1, unsatisfiableLoad: 1,
		},
		{
			name: "a PodGroup claim for 4 on one island: both workers share it",
			in: func() Inputs {
				in := base()
				pg := gang("island", 2)
				pg.Status.ResourceClaimStatuses = []schedulingv1beta1.PodGroupResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("island-gpus")}}
				in.PodGroups = []*schedulingv1beta1.PodGroup{pg}
				shared := want("island-gpus", 4, true)
				a, b := member("r0", "island"), member("r1", "island")
				for _, p := range []*corev1.Pod{a, b} {
					p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("island-4gpu")}}
				}
				return withPods(in, []*resourceapi.ResourceClaim{shared}, a, b)
			}(),
			// node-a's free island 4 takes the claim; node-b is tainted.
			stranded: map[GPUKey]int{{"node-b", h100}: 8},
			pending:  2, workloads: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Strand(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Stranded) != fmt.Sprint(tc.stranded) {
				t.Errorf("stranded = %v, want %v", got.Stranded, tc.stranded)
			}
			if got.PendingPods != tc.pending || got.Unsatisfiable != tc.unsatisfiable {
				t.Errorf("pending %d, unsatisfiable %d pods; want %d, %d", got.PendingPods, got.Unsatisfiable, tc.pending, tc.unsatisfiable)
			}
			if got.Workloads != tc.workloads || got.UnsatisfiableWorkloads != tc.unsatisfiableLoad {
				t.Errorf("workloads %d, unsatisfiable %d; want %d, %d", got.Workloads, got.UnsatisfiableWorkloads, tc.workloads, tc.unsatisfiableLoad)
			}
		})
	}
}

// TestStrandedDeviceTaintRules: a GPU a DeviceTaintRule takes out of
// service (NoSchedule, NoExecute) is no candidate for a pod that does not
// tolerate the taint, and it is not stranded either: the admin took it out
// on purpose, as the plugin's own taint does. A claim that tolerates the
// taint may still be given it.
func TestStrandedDeviceTaintRules(t *testing.T) {
	rule := func(name string, effect resourceapi.DeviceTaintEffect, pool string, device *string) *resourceapi.DeviceTaintRule {
		return &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(pool), Device: device},
				Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: effect},
			},
		}
	}
	drain := rule("drain-node-b", resourceapi.DeviceTaintEffectNoSchedule, "node-b", nil)
	tolerating := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "example.com/maintenance", Operator: resourceapi.DeviceTolerationOpExists}}
		return c
	}
	// node-a: 4 free (island 4); node-b: 8 free, unless a rule taints them.
	in := func(rules []*resourceapi.DeviceTaintRule, c *resourceapi.ResourceClaim) Inputs {
		return Inputs{
			DriverName: driver, Now: now,
			Slices:     []*resourceapi.ResourceSlice{islandNode("node-a"), islandNode("node-b")},
			Nodes:      []*corev1.Node{node("node-a", true, true), node("node-b", true, true)},
			Classes:    []*resourceapi.DeviceClass{gpuClass()},
			Claims:     []*resourceapi.ResourceClaim{holding("run-a", "node-a", 0, 1, 2, 3), c},
			Pods:       []*corev1.Pod{unscheduled("p", c.Name)},
			TaintRules: rules,
		}
	}
	for _, tc := range []struct {
		name          string
		in            Inputs
		stranded      map[GPUKey]int
		unsatisfiable int
	}{
		{
			name:     "no rule: a one-GPU pod may use both nodes",
			in:       in(nil, want("one", 1, false)),
			stranded: map[GPUKey]int{},
		},
		{
			name:     "node-b drained by a rule: the pod fits node-a, node-b's 8 are out of service, not stranded",
			in:       in([]*resourceapi.DeviceTaintRule{drain}, want("one", 1, false)),
			stranded: map[GPUKey]int{},
		},
		{
			name:     "NoExecute drains as NoSchedule does",
			in:       in([]*resourceapi.DeviceTaintRule{rule("evict-node-b", resourceapi.DeviceTaintEffectNoExecute, "node-b", nil)}, want("one", 1, false)),
			stranded: map[GPUKey]int{},
		},
		{
			// Six fit only on node-b, which the rule drains: the pod
			// cannot be placed, node-a's 4 free GPUs are of no use to
			// it (stranded), node-b's are out of service.
			name:          "six GPUs with node-b drained: unsatisfiable, only node-a's free GPUs stranded",
			in:            in([]*resourceapi.DeviceTaintRule{drain}, want("six", 6, false)),
			stranded:      map[GPUKey]int{{"node-a", h100}: 4},
			unsatisfiable: 1,
		},
		{
			name:     "a claim that tolerates the taint is given node-b's GPUs",
			in:       in([]*resourceapi.DeviceTaintRule{drain}, tolerating(want("six", 6, false))),
			stranded: map[GPUKey]int{{"node-a", h100}: 4},
		},
		{
			name:     "a rule on one device: the other 7 of node-b still count",
			in:       in([]*resourceapi.DeviceTaintRule{rule("gpu-0", resourceapi.DeviceTaintEffectNoSchedule, "node-b", ptr.To("gpu-0"))}, want("six", 6, false)),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 1},
		},
		{
			// Effect None marks a device and keeps no pod off it: an
			// unused GPU under it is stranded like any other.
			name:     "effect None keeps nothing off: node-b's GPUs the pod leaves are stranded",
			in:       in([]*resourceapi.DeviceTaintRule{rule("mark", resourceapi.DeviceTaintEffectNone, "node-b", nil)}, want("six", 6, false)),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 2},
		},
		{
			// Without DRADeviceTaintRules (1.36's default) the scheduler
			// ignores the rules, and so does the accounting.
			name: "rules off (1.36): node-b counts as without the rule",
			in: func() Inputs {
				in := in([]*resourceapi.DeviceTaintRule{drain}, want("six", 6, false))
				f, err := scheduler.FeaturesFor("1.36")
				if err != nil {
					t.Fatal(err)
				}
				in.Features = f
				return in
			}(),
			stranded: map[GPUKey]int{{"node-a", h100}: 4, {"node-b", h100}: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Strand(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Stranded) != fmt.Sprint(tc.stranded) {
				t.Errorf("stranded = %v, want %v", got.Stranded, tc.stranded)
			}
			if got.PendingPods != 1 || got.Unsatisfiable != tc.unsatisfiable || got.UnsatisfiableWorkloads != tc.unsatisfiable {
				t.Errorf("pending %d, unsatisfiable %d pods (%d workloads); want 1, %d", got.PendingPods, got.Unsatisfiable, got.UnsatisfiableWorkloads, tc.unsatisfiable)
			}
		})
	}
}
