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

package nodestate

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/fleet"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// repoFile reads a file of the repository by its path from the root.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recipeSection is the "Add a sharing strategy" recipe of
// docs/development.md, up to the next heading.
func recipeSection(t *testing.T) string {
	t.Helper()
	doc := repoFile(t, "docs/development.md")
	_, after, ok := strings.Cut(doc, "\n### Add a sharing strategy\n")
	if !ok {
		t.Fatal(`docs/development.md has no recipe "### Add a sharing strategy"`)
	}
	if i := strings.Index(after, "\n#"); i >= 0 {
		after = after[:i]
	}
	return after
}

// letters is s lower-cased with everything but letters dropped, so that
// the heading "Time-slicing" matches the value TimeSlicing.
func letters(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

// TestEveryStrategyIsComplete walks the recipe "Add a sharing strategy"
// (docs/development.md) for every strategy of the config API: a strategy
// added there and not everywhere the recipe names fails here, with the
// step that is missing.
func TestEveryStrategyIsComplete(t *testing.T) {
	recipe := recipeSection(t)
	sharingDoc := repoFile(t, "docs/sharing.md")
	policy := repoFile(t, "deployments/helm/gpudra/templates/config-policy.yaml")
	var headings []string
	for _, line := range strings.Split(sharingDoc, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings = append(headings, letters(h))
		}
	}
	var strategyRow string
	for _, line := range strings.Split(sharingDoc, "\n") {
		if strings.HasPrefix(line, "| `sharing.strategy` |") {
			strategyRow = line
		}
	}

	for _, v := range configapi.SupportedSharingStrategies {
		t.Run(v, func(t *testing.T) {
			// The API: the pool's default sharing takes every strategy.
			if _, err := configapi.SharingFromFlag(v); err != nil {
				t.Errorf("configapi.SharingFromFlag(%q): %v: add the strategy to SharingFromFlag (pkg/api/resource/v1alpha1/sharing.go)", v, err)
			}
			// The checkpoint records it under the API's value.
			if !slices.Contains(checkpoint.SharingStrategies, v) {
				t.Errorf("checkpoint.SharingStrategies lacks %q: add its constant, with the API's value, in internal/checkpoint/sharing.go", v)
			}
			// The plan records it for a device whose config asks for it.
			checkPlanned(t, v)
			// The node state implements it.
			st, ok := strategyOf(&checkpoint.DeviceSharing{Strategy: v})
			if !ok {
				t.Errorf("no sharingStrategy named %q in sharingStrategies (internal/nodestate/sharing.go): implement it in internal/nodestate/sharing_<strategy>.go and list it there", v)
			} else if name := reflect.TypeOf(st).Name(); !strings.Contains(recipe, name) {
				// The recipe points at the implementations to copy from.
				t.Errorf("the recipe \"Add a sharing strategy\" does not name %s, the implementation of %q", name, v)
			}
			// The controller's fleet accounting counts it.
			if !slices.Contains(fleet.AllocatedSharing, v) {
				t.Errorf("fleet.AllocatedSharing lacks %q: add it in internal/fleet/sharing.go (constant, AllocatedSharing, decodeStrategy)", v)
			}
			// The ValidatingAdmissionPolicy admits it.
			if !strings.Contains(policy, "'"+v+"'") {
				t.Errorf("deployments/helm/gpudra/templates/config-policy.yaml does not admit strategy %q", v)
			}
			// The docs: a row value and a section of its own.
			if !strings.Contains(strategyRow, "`"+v+"`") {
				t.Errorf("docs/sharing.md: the row of sharing.strategy in the configuration table does not name `%s`", v)
			}
			if !slices.Contains(headings, letters(v)) {
				t.Errorf("docs/sharing.md has no section (## heading) for %q", v)
			}
		})
	}
}

// checkPlanned plans a claim of one GPU whose config asks for strategy v,
// and checks that the device's record names v.
func checkPlanned(t *testing.T, v string) {
	t.Helper()
	claim := makeClaim(claimSpec{
		name:    "share",
		results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
		claimConfigs: []opaqueConfig{{
			params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"` + v + `"}}`,
		}},
	})
	planned, err := claimplan.Plan(claimplan.Options{DriverName: testDriver, Node: testInventory(1), MPS: true}, claim)
	if err != nil {
		t.Errorf("plan a claim that asks for %q: %v (Validate in pkg/api/resource/v1alpha1/sharing.go, planSharing in internal/claimplan/sharing.go)", v, err)
		return
	}
	if len(planned) != 1 || planned[0].Sharing == nil || planned[0].Sharing.Strategy != v {
		t.Errorf("a claim that asks for %q is planned as %+v: record it in planSharing (internal/claimplan/sharing.go)", v, planned)
	}
}

// TestStrategyEnumsAgree checks that the config API, the checkpoint and
// the node state list the same strategies: the checkpoint keeps its own
// strings (its file format must not move with the API), so nothing but
// this test makes them agree.
func TestStrategyEnumsAgree(t *testing.T) {
	api := slices.Sorted(slices.Values(configapi.SupportedSharingStrategies))
	recorded := slices.Sorted(slices.Values(checkpoint.SharingStrategies))
	var implemented []string
	for _, st := range sharingStrategies {
		implemented = append(implemented, st.name())
	}
	slices.Sort(implemented)
	if !slices.Equal(api, recorded) {
		t.Errorf("the config API's strategies %v and the checkpoint's %v differ", api, recorded)
	}
	if !slices.Equal(api, implemented) {
		t.Errorf("the config API's strategies %v and those the node state implements %v differ", api, implemented)
	}
	// The constants mean the same strategy.
	if checkpoint.SharingMPS != string(configapi.MPSStrategy) || checkpoint.SharingTimeSlicing != string(configapi.TimeSlicingStrategy) {
		t.Error("checkpoint.SharingMPS/SharingTimeSlicing differ from the config API's values")
	}
}
