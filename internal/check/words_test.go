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
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// Tests that check's words say what is so (issue 30's "fewer wrong
// words"): each runs check on a few manifests written here and reads the
// findings' messages and hints.

// checkYAML runs check on manifests given as text, on one node of a
// profile, with gpudra's classes known, at a Kubernetes version ("" for
// the newest).
func checkYAML(t *testing.T, profile, kubernetes, manifests string) *Report {
	t.Helper()
	in := &scheduler.Manifests{}
	if err := in.Add("words.yaml", []byte(manifests)); err != nil {
		t.Fatal(err)
	}
	o := Options{Inputs: in, BuiltinClasses: true, ListLimit: 8, KubernetesVersion: kubernetes}
	rep, err := Run(context.Background(), onProfile(t, profile, 1, o))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// findingsOf returns the report's findings of a kind.
func findingsOf(rep *Report, kind FindingKind) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// TestVendorClassHintNamesOneClass: a claim for another driver's class
// gets gpudra's one equivalent, or word that there is none, and not the
// list of every gpudra class, which leaves the user to guess.
func TestVendorClassHintNamesOneClass(t *testing.T) {
	classes := []string{"vgpu.nvidia.com"}
	for c := range vendorClasses {
		classes = append(classes, c)
	}
	for c := range vendorClassesWithoutEquivalent {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var b strings.Builder
	for i, c := range classes {
		fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c%d}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly: {deviceClassName: %s}\n", i, c)
	}
	rep := checkYAML(t, "dgx-h100", "", b.String())
	seen := map[string]bool{}
	for _, f := range findingsOf(rep, FindingUnknownClass) {
		class := classes[0]
		for _, c := range classes {
			if strings.Contains(f.Message, `"`+c+`"`) {
				class = c
			}
		}
		seen[class] = true
		if strings.Contains(f.Hint, "gpudra's classes:") || strings.Contains(f.Hint, "timeslicing.gpudra.io") {
			t.Errorf("%s: the hint lists gpudra's classes: %s", class, f.Hint)
		}
		if ours, ok := vendorClasses[class]; ok && !strings.Contains(f.Hint, "gpudra's class for these devices is "+ours) {
			t.Errorf("%s: the hint does not name %s: %s", class, ours, f.Hint)
		}
		if why, ok := vendorClassesWithoutEquivalent[class]; ok && f.Hint != why {
			t.Errorf("%s: the hint does not say why gpudra has no equivalent: %s", class, f.Hint)
		}
		if class == "vgpu.nvidia.com" && !strings.Contains(f.Hint, "no equivalent") {
			t.Errorf("%s: the hint does not say gpudra has no equivalent: %s", class, f.Hint)
		}
	}
	for _, c := range classes {
		if !seen[c] {
			t.Errorf("no unknown-class finding for %s", c)
		}
	}
}

// TestNoReferenceToFindingsThatAreNot: a claim or pod that says "see the
// findings" comes with a finding the default output shows (an error or a
// warning) on every corpus case.
func TestNoReferenceToFindingsThatAreNot(t *testing.T) {
	for _, c := range loadCorpus(t) {
		rep, err := checkCorpus(t, c)
		if err != nil {
			continue
		}
		assertFindingsReferred(t, c.file, rep)
	}
}

// assertFindingsReferred fails when the report refers to findings and
// shows none.
func assertFindingsReferred(t *testing.T, name string, rep *Report) {
	t.Helper()
	var refs []string
	for _, c := range rep.Claims {
		for _, s := range append(append([]string(nil), c.Unsatisfiable...), c.PrepareFails) {
			if strings.Contains(s, "see the findings") {
				refs = append(refs, c.Name+": "+s)
			}
		}
	}
	for _, p := range rep.Pods {
		for _, s := range p.Blocked {
			if strings.Contains(s, "see the findings") {
				refs = append(refs, p.Name+": "+s)
			}
		}
	}
	if len(refs) > 0 && rep.Errors()+rep.Warnings() == 0 {
		t.Errorf("%s: refers to findings and shows none: %s", name, strings.Join(refs, "; "))
	}
}
