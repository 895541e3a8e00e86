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

package admission

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpudratest/policycel"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// The chart's ValidatingAdmissionPolicy (deployments/helm/gpudra/templates/
// config-policy.yaml) checks what CEL can of gpudra's configs, for clusters
// without the webhook. TestConfigPolicy evaluates its expressions with the
// API server's CEL environment against configs with known answers, and
// checks that the policy is never stricter than the webhook (the plugin's
// decoder) and that its lists of known fields are the config API's.

const policyFile = "../../deployments/helm/gpudra/templates/config-policy.yaml"

// loadPolicy reads the policy from the chart template, rendered for the
// given driver name.
func loadPolicy(t *testing.T, driverName string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(policyFile))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "{{-") {
			continue // chart conditionals and label includes
		}
		l = strings.ReplaceAll(l, "{{ .Values.driverName }}", driverName)
		l = strings.ReplaceAll(l, `{{ include "gpudra.fullname" . }}`, "gpudra")
		if strings.Contains(l, "{{") {
			t.Fatalf("%s: template action this test does not render: %s", policyFile, l)
		}
		kept = append(kept, l)
	}
	doc := strings.Split(strings.Join(kept, "\n"), "\n---\n")[0]
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &vap); err != nil {
		t.Fatalf("%s: %v", policyFile, err)
	}
	return &vap
}

// policyEvaluator runs a policy's variables and validations as the API
// server does, on unstructured objects.
type policyEvaluator struct {
	vars        []cel.Program
	varNames    []string
	validations []cel.Program
	messages    []cel.Program
}

func newPolicyEvaluator(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy) *policyEvaluator {
	t.Helper()
	env := policycel.Env(t)
	compile := func(what, expr string) cel.Program {
		t.Helper()
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v\n%s", what, iss.Err(), expr)
		}
		prg, err := env.Program(ast, cel.CostLimit(1_000_000))
		if err != nil {
			t.Fatal(err)
		}
		return prg
	}
	e := &policyEvaluator{}
	for _, v := range vap.Spec.Variables {
		e.vars = append(e.vars, compile("variable "+v.Name, v.Expression))
		e.varNames = append(e.varNames, v.Name)
	}
	for i, v := range vap.Spec.Validations {
		e.validations = append(e.validations, compile("validation", v.Expression))
		if v.MessageExpression == "" {
			t.Fatalf("validation %d has no messageExpression: every denial must name the field", i)
		}
		e.messages = append(e.messages, compile("messageExpression", v.MessageExpression))
	}
	return e
}

// evaluate returns the denial messages for an admission of obj (nil: allowed).
func (e *policyEvaluator) evaluate(t *testing.T, resource, operation string, obj, old any) []string {
	t.Helper()
	vars := map[string]any{}
	act := map[string]any{
		"object":    obj,
		"oldObject": old,
		"request":   map[string]any{"operation": operation, "resource": map[string]any{"resource": resource}},
		"variables": vars,
	}
	for i, prg := range e.vars {
		out, _, err := prg.Eval(act)
		if err != nil {
			return []string{"variable " + e.varNames[i] + " fails: " + err.Error()}
		}
		vars[e.varNames[i]] = out.Value()
	}
	var denied []string
	for i, prg := range e.validations {
		out, _, err := prg.Eval(act)
		if err != nil {
			denied = append(denied, "evaluation error: "+err.Error())
			continue
		}
		if out.Value() == true {
			continue
		}
		msg, _, err := e.messages[i].Eval(act)
		if err != nil {
			t.Fatalf("messageExpression %d fails: %v", i, err)
		}
		denied = append(denied, msg.Value().(string))
	}
	return denied
}

// unstructured turns a typed object into what the API server hands CEL.
func unstructured(t *testing.T, obj any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(mustJSON(t, obj), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConfigPolicy(t *testing.T) {
	e := newPolicyEvaluator(t, loadPolicy(t, driver))
	cases := []struct {
		name     string
		params   string
		denied   string // a substring of the policy's message; "" allowed
		webhook  bool   // the webhook (the plugin's decoder) also denies
		resource string
	}{
		{name: "valid GpuConfig", params: goodGpu},
		{name: "valid MigConfig", params: goodMig},
		{name: "sharing", params: sharing},
		{name: "time-slicing", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`},
		{name: "MPS limits", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"10Gi","perDevicePinnedMemoryLimits":{"0":"5Gi"}}}}`},
		{name: "misspelt field", params: typo, denied: "unknown field(s) driverCapabilites", webhook: true},
		{name: "unsupported capability", params: badValue, denied: "driverCapabilities: supported values", webhook: true},
		{name: "duplicate capability", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","compute"]}`, denied: "listed only once", webhook: true},
		{name: "unknown kind", params: badKind, denied: `not "GpuConfg"`, webhook: true},
		{name: "another API", params: otherAPI, denied: "apiVersion must be resource.gpudra.io/v1alpha1", webhook: true},
		{name: "thread percentage out of range", params: badSharing, denied: "between 1 and 100", webhook: true},
		{name: "unknown strategy", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Magic"}}`, denied: "TimeSlicing or MPS", webhook: true},
		{name: "unknown interval", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Forever"}}}`, denied: "Default, Short, Medium, Long", webhook: true},
		{name: "unknown sharing field", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpss":{}}}`, denied: "known fields: strategy", webhook: true},
		// What CEL cannot tell, the webhook still catches.
		{name: "a bad quantity: the webhook's job", params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"lots"}}}`, webhook: true},
		{name: "in a template", params: typo, denied: "unknown field(s)", webhook: true, resource: "resourceclaimtemplates"},
		{name: "in a DeviceClass", params: badKind, denied: "kind must be", webhook: true, resource: "deviceclasses"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj any
			switch tc.resource {
			case "", "resourceclaims":
				tc.resource = "resourceclaims"
				obj = claim(opaque("gpu.nvidia.com", otherAPI), opaque(driver, tc.params))
			case "resourceclaimtemplates":
				obj = template(opaque(driver, tc.params))
			case "deviceclasses":
				obj = class(tc.params)
			}
			denied := e.evaluate(t, tc.resource, "CREATE", unstructured(t, obj), nil)
			switch {
			case tc.denied == "" && len(denied) > 0:
				t.Errorf("denied: %q", denied)
			case tc.denied != "" && !slices.ContainsFunc(denied, func(m string) bool { return strings.Contains(m, tc.denied) }):
				t.Errorf("denials %q do not say %q", denied, tc.denied)
			}
			_, err := configapi.Decode([]byte(tc.params))
			if (err != nil) != tc.webhook {
				t.Errorf("the webhook's decoder says %v; the test expects denied=%v", err, tc.webhook)
			}
			if len(denied) > 0 && err == nil {
				t.Errorf("the policy denies what the plugin accepts: %q", denied)
			}
		})
	}

	t.Run("other drivers' configs are not read", func(t *testing.T) {
		obj := claim(opaque("gpu.nvidia.com", `{"anything":"goes"}`))
		if denied := e.evaluate(t, "resourceclaims", "CREATE", unstructured(t, obj), nil); len(denied) > 0 {
			t.Errorf("denied: %q", denied)
		}
	})
	t.Run("an update that keeps an old bad config is allowed", func(t *testing.T) {
		bad := unstructured(t, claim(opaque(driver, typo)))
		if denied := e.evaluate(t, "resourceclaims", "UPDATE", bad, bad); len(denied) > 0 {
			t.Errorf("denied: %q", denied)
		}
		good := unstructured(t, claim(opaque(driver, goodGpu)))
		if denied := e.evaluate(t, "resourceclaims", "UPDATE", bad, good); len(denied) == 0 {
			t.Error("an update to a bad config was allowed")
		}
	})
}

// TestConfigPolicyKnowsEveryField: the policy's lists of known fields are
// exactly the JSON fields of the config API's types, so a field the API
// gains (or loses) fails here until the policy is updated, instead of the
// policy rejecting valid configs.
func TestConfigPolicyKnowsEveryField(t *testing.T) {
	raw, err := os.ReadFile(filepath.FromSlash(policyFile))
	if err != nil {
		t.Fatal(err)
	}
	lists := regexp.MustCompile(`k in \[([^\]]*)\]`).FindAllStringSubmatch(string(raw), -1)
	var policy [][]string
	for _, l := range lists {
		var fields []string
		for _, f := range strings.Split(l[1], ",") {
			fields = append(fields, strings.Trim(strings.TrimSpace(f), "'"))
		}
		sort.Strings(fields)
		policy = append(policy, fields)
	}
	for _, typ := range []any{configapi.GpuConfig{}, configapi.MigConfig{}, configapi.Sharing{}, configapi.MPSConfig{}} {
		want := jsonFields(reflect.TypeOf(typ))
		if !slices.ContainsFunc(policy, func(f []string) bool { return slices.Equal(f, want) }) {
			t.Errorf("%T has the fields %v; no list of known fields in %s matches (it has %v)", typ, want, policyFile, policy)
		}
	}
	if got := jsonFields(reflect.TypeOf(configapi.TimeSlicingConfig{})); !slices.Equal(got, []string{"interval"}) {
		t.Errorf("TimeSlicingConfig has the fields %v; the policy knows only interval", got)
	}
}

// jsonFields lists the JSON names of a struct's fields, inlined structs
// (TypeMeta) included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
