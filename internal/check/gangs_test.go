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
	"context"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// checkOn checks YAML on n fake nodes of a profile.
func checkOn(t *testing.T, profile string, n int, yaml string) *Report {
	t.Helper()
	in := &scheduler.Manifests{}
	if err := in.Add("input.yaml", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, profile, n, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func podNamed(t *testing.T, rep *Report, name string) PodInfo {
	t.Helper()
	for _, p := range rep.Pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pod %s in the report", name)
	return PodInfo{}
}

const gangJob = `
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: trainer, namespace: ml}
spec:
  schedulingPolicy:
    gang: {minCount: WORKERS}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: batch/v1
kind: Job
metadata: {name: trainer, namespace: ml}
spec:
  parallelism: WORKERS
  template:
    spec:
      restartPolicy: Never
      schedulingGroup: {podGroupName: trainer}
      containers:
      - name: w
        image: x
        resources:
          claims: [{name: gpu}]
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
`

// TestGangAllOrNothing: a gang Job stands for all its workers, placed
// together; one more than the inventory has leaves all of them pending.
func TestGangAllOrNothing(t *testing.T) {
	rep := checkOn(t, "dgx-h100", 1, strings.ReplaceAll(gangJob, "WORKERS", "8"))
	seen := map[string]bool{}
	for _, p := range rep.Pods {
		if p.Pending || len(p.Containers) != 1 || len(p.Containers[0].Devices) != 1 {
			t.Fatalf("pod %s: pending %v, containers %+v; want one GPU each", p.Name, p.Pending, p.Containers)
		}
		d := p.Containers[0].Devices[0]
		if seen[d] {
			t.Errorf("two workers of the gang got %s", d)
		}
		seen[d] = true
	}
	if len(rep.Pods) != 8 {
		t.Errorf("%d pods checked, want the gang's 8", len(rep.Pods))
	}

	rep = checkOn(t, "dgx-h100", 1, strings.ReplaceAll(gangJob, "WORKERS", "9"))
	for _, p := range rep.Pods {
		if !p.Pending {
			t.Errorf("pod %s of a gang of 9 on 8 GPUs is placed on %s; the gang waits whole", p.Name, p.Node)
		}
	}
	found := false
	for _, f := range rep.Findings {
		if f.Kind == FindingUnsatisfiable && f.Object == "PodGroup ml/trainer" && strings.Contains(f.Message, "8 of the 9 pods") {
			found = true
		}
	}
	if !found {
		t.Errorf("no finding on the PodGroup saying 8 of 9 fit: %+v", rep.Findings)
	}
}

// TestPodGroupClaim: a pod claim matching its PodGroup's is one claim for
// the group; each worker's container gets the request it names.
func TestPodGroupClaim(t *testing.T) {
	rep := checkOn(t, "dgx-h100", 1, `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: pair, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - {name: rank-0, exactly: {deviceClassName: gpu.gpudra.io}}
      - {name: rank-1, exactly: {deviceClassName: gpu.gpudra.io}}
      constraints:
      - {requests: [rank-0, rank-1], matchAttribute: gpu.gpudra.io/nvlinkGroup}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
  resourceClaims: [{name: gpus, resourceClaimTemplateName: pair}]
---
apiVersion: v1
kind: Pod
metadata: {name: r0, namespace: ml}
spec:
  schedulingGroup: {podGroupName: pair}
  containers: [{name: w, image: x, resources: {claims: [{name: gpus, request: rank-0}]}}]
  resourceClaims: [{name: gpus, resourceClaimTemplateName: pair}]
---
apiVersion: v1
kind: Pod
metadata: {name: r1, namespace: ml}
spec:
  schedulingGroup: {podGroupName: pair}
  containers: [{name: w, image: x, resources: {claims: [{name: gpus, request: rank-1}]}}]
  resourceClaims: [{name: gpus, resourceClaimTemplateName: pair}]
`)
	groupClaims := 0
	for _, c := range rep.Claims {
		if strings.HasPrefix(c.Name, "ml/pair") {
			groupClaims++
		}
	}
	if groupClaims != 1 {
		t.Errorf("%d claims for the PodGroup, want one: %+v", groupClaims, rep.Claims)
	}
	a, b := podNamed(t, rep, "ml/r0"), podNamed(t, rep, "ml/r1")
	if a.Pending || b.Pending || len(a.Containers[0].Devices) != 1 || len(b.Containers[0].Devices) != 1 ||
		a.Containers[0].Devices[0] == b.Containers[0].Devices[0] {
		t.Errorf("workers got %+v and %+v; want one GPU each, different, from the one claim", a.Containers, b.Containers)
	}
}

// TestNodeConstraints: a pod goes only where its node selector and
// tolerations let it, on the Node objects among the inputs.
func TestNodeConstraints(t *testing.T) {
	const nodes = `
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {kubernetes.io/hostname: node-1, pool: inference}
spec:
  taints: [{key: dedicated, value: inference, effect: NoSchedule}]
---
apiVersion: v1
kind: Node
metadata:
  name: node-2
  labels: {kubernetes.io/hostname: node-2, pool: training}
---
`
	pod := func(spec string) string {
		return `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
` + spec + `
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
`
	}
	for _, tc := range []struct {
		name, yaml, node, why string
	}{
		{name: "selector picks node-2", yaml: nodes + pod("  nodeSelector: {pool: training}"), node: "node-2"},
		{name: "the taint keeps an intolerant pod off node-1", yaml: nodes + pod("  nodeSelector: {pool: inference}"), why: "untolerated taint {dedicated: inference}"},
		{name: "a tolerating pod goes to node-1", yaml: nodes + pod("  nodeSelector: {pool: inference}\n  tolerations: [{key: dedicated, operator: Exists}]"), node: "node-1"},
		{name: "without Node objects the bare nodes have no labels", yaml: pod("  nodeSelector: {pool: training}"), why: "add Node manifests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := checkOn(t, "dgx-h100", 2, tc.yaml)
			p := podNamed(t, rep, "ml/p")
			if tc.node != "" {
				if p.Pending || p.Node != tc.node {
					t.Errorf("pod on %q (pending %v), want %s", p.Node, p.Pending, tc.node)
				}
				return
			}
			if !p.Pending {
				t.Fatalf("pod placed on %s, want it pending: %s", p.Node, tc.why)
			}
			var reasons []string
			for _, c := range rep.Claims {
				reasons = append(reasons, c.Unsatisfiable...)
			}
			if !strings.Contains(strings.Join(reasons, "\n"), tc.why) {
				t.Errorf("reasons %q, want %q", reasons, tc.why)
			}
		})
	}
}

// TestSharedClaimOrder: a gang's pod that lists the group's claim before
// one of its own, or asks for extended resources beside it, is an error
// (kube-scheduler 1.37 swaps the allocations); the group's claim listed
// last, or a pod outside any group, is not.
func TestSharedClaimOrder(t *testing.T) {
	const head = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, exactly: {deviceClassName: gpu.gpudra.io}}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 1}}
  resourceClaims: [{name: job, resourceClaimTemplateName: one-gpu}]
---
apiVersion: v1
kind: Pod
metadata: {name: w, namespace: ml}
spec:
  schedulingGroup: {podGroupName: GROUP}
`
	for _, tc := range []struct {
		name, group, pod string
		want             string // what the finding says, "" for none
	}{
		{"shared first", "train", `  containers: [{name: w, image: x, resources: {claims: [{name: job}, {name: gpu}]}}]
  resourceClaims: [{name: job, resourceClaimTemplateName: one-gpu}, {name: gpu, resourceClaimTemplateName: one-gpu}]`,
			"claim job, which the pods of PodGroup ml/train share, is listed before the pod's own claim gpu (spec.resourceClaims[1])"},
		{"shared last", "train", `  containers: [{name: w, image: x, resources: {claims: [{name: job}, {name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}, {name: job, resourceClaimTemplateName: one-gpu}]`, ""},
		{"extended resources", "train", `  containers: [{name: w, image: x, resources: {claims: [{name: job}], limits: {nvidia.com/gpu: 1}}}]
  resourceClaims: [{name: job, resourceClaimTemplateName: one-gpu}]`,
			"comes before the claim kube-scheduler makes for the pod's extended resources"},
		{"no group among the inputs", "other", `  containers: [{name: w, image: x, resources: {claims: [{name: job}, {name: gpu}]}}]
  resourceClaims: [{name: job, resourceClaimTemplateName: one-gpu}, {name: gpu, resourceClaimTemplateName: one-gpu}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := checkOn(t, "dgx-h100", 1, strings.Replace(head, "GROUP", tc.group, 1)+tc.pod+"\n")
			got := findings(rep, FindingSharedClaimFirst)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("unexpected finding: %+v", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Message, tc.want) || got[0].Severity != SeverityError):
				t.Errorf("findings %+v, want one error saying %q", got, tc.want)
			}
		})
	}
}
