//go:build chart

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

package chart

import (
	"encoding/json"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpudratest/policycel"
)

// The controller's admission policies (controller-validatingadmissionpolicy.yaml)
// narrow what RBAC grants it for multi-node NVLink: a Node patch may change
// only the NVLink domain label, and ResourceSlice writes only the channel
// pools. TestControllerPolicies evaluates them with the API server's CEL
// environment against the controller's own writes, which must pass, and
// against what a stolen token would try, which must not.

const controllerSA = "system:serviceaccount:" + namespace + ":gpudra-controller"

// controllerPolicy renders the chart and returns the named policy.
func controllerPolicy(t *testing.T, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	policy, ok := ofKind(objects(t, render(t)), "ValidatingAdmissionPolicy")[name]
	if !ok {
		t.Fatalf("the chart renders no policy %s", name)
	}
	data, err := yaml.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(data, &vap); err != nil {
		t.Fatal(err)
	}
	return &vap
}

// toMap is obj as the policy's CEL sees it (nil stays nil).
func toMap(t *testing.T, obj any) any {
	t.Helper()
	if obj == nil {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// judge evaluates the policy for a request by user and returns the
// messages of the validations that deny it; matched is false when the
// policy does not apply to the request.
func judge(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy, user, op string, obj, old any) (denied []string, matched bool) {
	t.Helper()
	env := policycel.Env(t)
	eval := func(expr string, act map[string]any) any {
		t.Helper()
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%v\n%s", iss.Err(), expr)
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(act)
		if err != nil {
			t.Fatalf("%v\n%s", err, expr)
		}
		return out.Value()
	}
	vars := map[string]any{}
	act := map[string]any{
		"object":    toMap(t, obj),
		"oldObject": toMap(t, old),
		"request":   map[string]any{"operation": op, "userInfo": map[string]any{"username": user}},
		"variables": vars,
	}
	for _, m := range vap.Spec.MatchConditions {
		if eval(m.Expression, act) != true {
			return nil, false
		}
	}
	for _, v := range vap.Spec.Variables {
		vars[v.Name] = eval(v.Expression, act)
	}
	for _, v := range vap.Spec.Validations {
		if eval(v.Expression, act) != true {
			denied = append(denied, strings.TrimSpace(v.Message+v.MessageExpression))
		}
	}
	return denied, true
}

func TestControllerPolicies(t *testing.T) {
	const label, ready = "gpu.gpudra.io/nvlink-domain", "gpu.gpudra.io/imex-ready"
	t.Run("nodes", func(t *testing.T) {
		vap := controllerPolicy(t, "gpudra-controller-nodes")
		node := func(labels map[string]string) *v1.Node {
			return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1", Labels: labels}}
		}
		old := node(map[string]string{"zone": "a"})
		allowed := map[string]*v1.Node{
			"set the label":      node(map[string]string{"zone": "a", label: "u.1"}),
			"set both labels":    node(map[string]string{"zone": "a", label: "u.1", ready: "true"}),
			"remove the label":   node(map[string]string{"zone": "a"}),
			"remove both labels": node(map[string]string{"zone": "a"}),
		}
		for name, n := range allowed {
			prev := old
			switch name {
			case "remove the label":
				prev = node(map[string]string{"zone": "a", label: "u.1"})
			case "remove both labels":
				prev = node(map[string]string{"zone": "a", label: "u.1", ready: "true"})
			}
			if denied, matched := judge(t, vap, controllerSA, "UPDATE", n, prev); !matched || len(denied) > 0 {
				t.Errorf("%s: matched %v, denied %v", name, matched, denied)
			}
		}
		tainted := node(map[string]string{"zone": "a"})
		tainted.Spec.Taints = []v1.Taint{{Key: "evil", Effect: v1.TaintEffectNoSchedule}}
		annotated := node(map[string]string{"zone": "a"})
		annotated.Annotations = map[string]string{"x": "y"}
		attacks := map[string]*v1.Node{
			"change another label": node(map[string]string{"zone": "b", label: "u.1"}),
			"add another label":    node(map[string]string{"zone": "a", "node-role.kubernetes.io/control-plane": ""}),
			"remove another label": node(nil),
			"taint the node":       tainted,
			"annotate the node":    annotated,
		}
		for name, n := range attacks {
			if denied, matched := judge(t, vap, controllerSA, "UPDATE", n, old); !matched || len(denied) == 0 {
				t.Errorf("%s: admitted (matched %v)", name, matched)
			}
		}
		if _, matched := judge(t, vap, "system:serviceaccount:other:sa", "UPDATE", attacks["taint the node"], old); matched {
			t.Error("the policy applies to other users")
		}
	})
	t.Run("resourceslices", func(t *testing.T) {
		vap := controllerPolicy(t, "gpudra-controller-resourceslices")
		slice := func(driver, pool string, node *string) *resourceapi.ResourceSlice {
			return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: driver, Pool: resourceapi.ResourcePool{Name: pool}, NodeName: node,
			}}
		}
		pool := slice("gpu.gpudra.io", "nvlink/u.1", nil)
		for _, op := range []string{"CREATE", "UPDATE", "DELETE"} {
			obj, old := any(pool), any(pool)
			if op == "DELETE" {
				obj = nil
			}
			if op == "CREATE" {
				old = nil
			}
			if denied, matched := judge(t, vap, controllerSA, op, obj, old); !matched || len(denied) > 0 {
				t.Errorf("%s of a channel pool slice: matched %v, denied %v", op, matched, denied)
			}
		}
		nodePool := slice("gpu.gpudra.io", "tray-1", ptr.To("tray-1"))
		if denied, _ := judge(t, vap, controllerSA, "DELETE", nil, nodePool); len(denied) == 0 {
			t.Error("the controller may delete a node's slice")
		}
		for name, s := range map[string]*resourceapi.ResourceSlice{
			"another driver's pool":    slice("other.example.com", "nvlink/u.1", nil),
			"a pool not nvlink/":       slice("gpu.gpudra.io", "network", nil),
			"a channel pool on a node": slice("gpu.gpudra.io", "nvlink/u.1", ptr.To("tray-1")),
		} {
			if denied, _ := judge(t, vap, controllerSA, "CREATE", s, nil); len(denied) == 0 {
				t.Errorf("create %s: admitted", name)
			}
		}
	})
}
