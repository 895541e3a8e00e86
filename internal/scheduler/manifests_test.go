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
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

func decodeOK(t *testing.T, data string) *Manifests {
	t.Helper()
	m := &Manifests{}
	if err := m.Add("in.yaml", []byte(data)); err != nil {
		t.Fatal(err)
	}
	return m
}

// Source.At finds a field's line in multi-document files, inside List
// items, behind block scalars and for map keys in brackets.
func TestSourceAt(t *testing.T) {
	m := decodeOK(t, `# a comment
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: t
spec:
  spec:
    devices:
      requests:
      - name: a
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: >-
                device.attributes['gpu.gpudra.io'].productName ==
                'x'
          - cel:
              expression: device.attributes['gpu.gpudra.io'].productName == 'y'
          capacity:
            requests:
              gpu.gpudra.io/memory: 1Gi
---
apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: c}
  spec:
    selectors:
    - cel: {expression: "true"}
`)
	tmpl := m.Templates[0].Source
	for _, tt := range []struct {
		src   Source
		field string
		line  int
	}{
		{tmpl, "", 6},
		{tmpl, "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression", 19},
		// Two selectors that start alike are told apart by index.
		{tmpl, "spec.spec.devices.requests[0].exactly.selectors[1].cel.expression", 23},
		{tmpl, "spec.spec.devices.requests[0].exactly.capacity.requests[gpu.gpudra.io/memory]", 26},
		// A field the document lacks: the nearest one it has.
		{tmpl, "spec.spec.devices.requests[0].exactly.count", 15},
		{m.Classes[0].Source, "", 31},
		{m.Classes[0].Source, "spec.selectors[0].cel.expression", 36},
	} {
		if got := tt.src.At(tt.field).Line; got != tt.line {
			t.Errorf("%s At(%q): line %d, want %d", tt.src.File, tt.field, got, tt.line)
		}
	}
	if m.Classes[0].Source.Field("spec") != "items[0].spec" {
		t.Errorf("Field of a List item: %q", m.Classes[0].Source.Field("spec"))
	}
}

// v1beta1 and v1beta2 objects are read as the v1 objects the API server
// stores, with a note; a misspelt field is reported against the version
// written, at its line.
func TestConvert(t *testing.T) {
	m := decodeOK(t, `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: old}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        deviceClassName: gpu.gpudra.io
        count: 2
        selectors:
        - cel: {expression: "true"}
      - name: any
        firstAvailable:
        - {name: a, deviceClassName: gpu.gpudra.io}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.gpudra.io
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    basic:
      attributes:
        type: {string: gpu}
      capacity:
        memory: {value: 80Gi}
---
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaim
metadata: {name: new}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io, cuont: 1}
`)
	if len(m.Templates) != 1 || len(m.Slices) != 1 || len(m.Claims) != 1 {
		t.Fatalf("decoded %d templates, %d slices, %d claims; problems %v", len(m.Templates), len(m.Slices), len(m.Claims), m.Problems)
	}
	reqs := m.Templates[0].Obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec.Devices.Requests
	if e := reqs[0].Exactly; e == nil || e.DeviceClassName != "gpu.gpudra.io" || e.Count != 2 || len(e.Selectors) != 1 {
		t.Errorf("v1beta1 request not moved under exactly: %+v", reqs[0])
	}
	if reqs[1].Exactly != nil || len(reqs[1].FirstAvailable) != 1 {
		t.Errorf("firstAvailable request: %+v", reqs[1])
	}
	dev := m.Slices[0].Obj.(*resourceapi.ResourceSlice).Spec.Devices[0]
	mem := dev.Capacity["memory"].Value
	if *dev.Attributes["type"].StringValue != "gpu" || mem.Value() != 80<<30 {
		t.Errorf("v1beta1 device not flattened: %+v", dev)
	}
	var notes, unknown []Problem
	for _, p := range m.Problems {
		switch p.Kind {
		case ProblemConverted:
			notes = append(notes, p)
		case ProblemUnknownField:
			unknown = append(unknown, p)
		}
	}
	if len(notes) != 3 || !notes[0].Note || !strings.Contains(notes[0].Message, "converted from resource.k8s.io/v1beta1") {
		t.Errorf("want a conversion note per object, got %+v", notes)
	}
	if len(unknown) != 1 || !strings.Contains(unknown[0].Message, "cuont") || unknown[0].Source.Line != 39 {
		t.Errorf("want the misspelt field at line 39, got %+v", unknown)
	}
}

// Workload controllers' pod templates are read as pods.
func TestWorkloads(t *testing.T) {
	const tmpl = `  template:
    spec:
      containers:
      - name: c
        image: x
        resources: {limits: {nvidia.com/gpu: 1}}
`
	m := decodeOK(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ml}\nspec:\n  replicas: 3\n"+tmpl+
		"---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n"+tmpl+
		"---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds}\nspec:\n"+tmpl+
		"---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n"+tmpl+
		"---\napiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cj}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n"+indent(tmpl, "    ")+
		"---\napiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: old}\nspec:\n"+tmpl)
	want := []struct {
		name, owner string
		replicas    int
	}{
		{"ml/d-0", "Deployment ml/d", 3},
		{"default/s-0", "StatefulSet default/s", 1},
		{"default/ds-0", "DaemonSet default/ds (one pod per node)", 1},
		{"default/j-0", "Job default/j", 2},
		{"default/cj-0", "CronJob default/cj", 1},
	}
	if len(m.Pods) != len(want) {
		t.Fatalf("got %d pods, want %d; problems %v", len(m.Pods), len(want), m.Problems)
	}
	for i, w := range want {
		p := m.Pods[i]
		if p.Name != w.name || p.Owner != w.owner || p.Replicas != w.replicas {
			t.Errorf("pod %d: %s from %q ×%d, want %s from %q ×%d", i, p.Name, p.Owner, p.Replicas, w.name, w.owner, w.replicas)
		}
		if c := p.Obj.(*v1.Pod).Spec.Containers; len(c) != 1 || c[0].Resources.Limits.Name("nvidia.com/gpu", "").Value() != 1 {
			t.Errorf("pod %d: containers %+v", i, c)
		}
		if !strings.HasSuffix(p.Source.Field("spec"), "template.spec") {
			t.Errorf("pod %d: its fields are at %s", i, p.Source.Field("spec"))
		}
	}
	if len(m.Problems) != 1 || m.Problems[0].Kind != ProblemInvalid || !strings.Contains(m.Problems[0].Hint, "apps/v1") {
		t.Errorf("extensions/v1beta1 Deployment: want one invalid problem naming apps/v1, got %+v", m.Problems)
	}
}

// Kinds the API server does not know: a misspelling is invalid (with the
// kind meant), a custom resource is skipped with a note; neither stops the
// rest. Input that is no YAML at all does.
func TestKinds(t *testing.T) {
	m := decodeOK(t, "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplte\nmetadata: {name: x}\n---\n"+
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n"+
		"apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: r}\nspec:\n  deviceSelector: {device: gpu-0}\n  taint: {key: k, effect: NoSchedule}\n")
	if len(m.Problems) != 2 {
		t.Fatalf("problems: %+v", m.Problems)
	}
	if p := m.Problems[0]; p.Kind != ProblemInvalid || p.Note || p.Hint != "did you mean ResourceClaimTemplate?" {
		t.Errorf("misspelt kind: %+v", p)
	}
	if p := m.Problems[1]; p.Kind != ProblemSkipped || !p.Note || p.GVK.Kind != "Widget" {
		t.Errorf("custom resource: %+v", p)
	}
	if len(m.Ignored) != 2 || len(m.TaintRules) != 1 {
		t.Errorf("ignored %v, taint rules %d", m.Ignored, len(m.TaintRules))
	}
	err := (&Manifests{}).Add("bad.yaml", []byte("kind: [\n"))
	if !errors.As(err, new(*InputError)) || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("malformed YAML: %v", err)
	}
}

func indent(s, pad string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestExtendedResourceProblems: what pkg/apis/core/validation rejects
// about extended resources, and what it takes (limits alone, equal
// requests, the implicit names of classes, which are kubernetes.io names
// and so overcommitable and fractional to the API server).
func TestExtendedResourceProblems(t *testing.T) {
	for _, tc := range []struct {
		name, resources, field, want string
	}{
		{"limit only", "limits: {nvidia.com/gpu: 2}", "", ""},
		{"equal", "limits: {nvidia.com/gpu: 2}\n      requests: {nvidia.com/gpu: 2}", "", ""},
		{"implicit name, fraction", "requests: {deviceclass.resource.kubernetes.io/gpu.gpudra.io: 500m}", "", ""},
		{"cpu without limit", "requests: {cpu: 500m}", "", ""},
		{"no limit", "requests: {nvidia.com/gpu: 1}", "spec.containers[0].resources.requests[nvidia.com/gpu]", "Limit must be set"},
		{"below limit", "limits: {nvidia.com/gpu: 2}\n      requests: {nvidia.com/gpu: 1}", "spec.containers[0].resources.requests[nvidia.com/gpu]", "must be equal to nvidia.com/gpu limit of 2"},
		{"fraction", "limits: {example.com/fpga: 0.5}", "spec.containers[0].resources.limits[example.com/fpga]", "must be an integer"},
		{"fraction, request only", "requests: {nvidia.com/gpu: 1500m}", "spec.containers[0].resources.requests[nvidia.com/gpu]", "must be an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeOK(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      "+tc.resources+"\n")
			var got []Problem
			for _, p := range m.Problems {
				if p.Kind == ProblemExtendedResource {
					got = append(got, p)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("rejected: %v", got)
			case tc.want != "" && (len(got) != 1 || got[0].Field != tc.field || !strings.Contains(got[0].Message, tc.want)):
				t.Errorf("got %+v, want one problem at %s saying %q", got, tc.field, tc.want)
			case tc.want != "" && !m.Pods[0].Rejected:
				t.Error("the pod is not marked rejected")
			}
		})
	}
	// In a workload's pod template, at the template's field.
	m := decodeOK(t, `apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - name: i
        image: x
        resources: {requests: {nvidia.com/gpu: 1}}
      containers: [{name: c, image: x}]
`)
	if len(m.Problems) != 1 || m.Problems[0].Field != "spec.template.spec.initContainers[0].resources.requests[nvidia.com/gpu]" || m.Problems[0].Source.Line != 11 || !m.Pods[0].Rejected {
		t.Errorf("got %+v", m.Problems)
	}
}
