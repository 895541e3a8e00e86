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
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gpudra/gpudra/internal/spelling"
)

// unknownKind reports an object whose kind the Kubernetes API scheme does
// not know. In an API group Kubernetes serves, that is a mistake the API
// server rejects (a misspelt kind, a removed version); in any other group
// it is a custom resource, which the scheduler's DRA plugin never reads:
// skipped, with a note.
func (m *Manifests) unknownKind(src Source, gvk schema.GroupVersionKind, name string) {
	object := strings.TrimSpace(gvk.Kind + " " + name)
	gv := gvk.GroupVersion()
	if kinds := kindsOf(gv); len(kinds) > 0 {
		hint := ""
		if k := spelling.Closest(gvk.Kind, kinds); k != "" {
			hint = fmt.Sprintf("did you mean %s?", k)
		}
		m.problem(ProblemInvalid, src, object, "kind", fmt.Sprintf("%s has no kind %s; the API server rejects the object", gv, gvk.Kind), hint)
		return
	}
	if release, ok := OlderWorkloadAPIs[gv.String()+" "+gvk.Kind]; ok {
		// The scheme (of the newest release) no longer knows it, but an
		// older supported release serves it: which one is the caller's
		// to judge against the release it checks.
		m.Ignored = append(m.Ignored, Ignored{Source: src, Kind: fmt.Sprintf("%s (%s)", gvk.Kind, gv), Name: name,
			Reason: "the Workload API of Kubernetes " + release + ", not read"})
		m.Problems = append(m.Problems, Problem{Kind: ProblemInvalid, Source: src.At("apiVersion"), Object: object, GVK: gvk, Field: "apiVersion",
			Message: fmt.Sprintf("%s %s is the Workload API of Kubernetes %s only (alpha); it is not read, and its pods are checked one by one", gv, gvk.Kind, release)})
		return
	}
	if versions := versionsOf(gvk.Group, gvk.Kind); len(versions) > 0 {
		m.problem(ProblemInvalid, src, object, "apiVersion", fmt.Sprintf("%s %s is not served by any Kubernetes release gpudra supports", gv, gvk.Kind),
			fmt.Sprintf("use apiVersion %s", strings.Join(versions, " or ")))
		return
	}
	if gvk.Group == resourceapi.GroupName || groupKnown(gvk.Group) {
		m.problem(ProblemInvalid, src, object, "kind", fmt.Sprintf("the API group %q has no kind %s in %s; the API server rejects the object", gvk.Group, gvk.Kind, gv.Version), "")
		return
	}
	m.Ignored = append(m.Ignored, Ignored{Source: src, Kind: fmt.Sprintf("%s (%s)", gvk.Kind, gv), Name: name,
		Reason: "a custom resource; the scheduler's DRA plugin does not read it"})
	m.Problems = append(m.Problems, Problem{Kind: ProblemSkipped, Note: true, Source: src, Object: object, GVK: gvk,
		Message: fmt.Sprintf("%s is not a Kubernetes kind (a custom resource of %s): skipped; nothing it does is part of the check", gvk.Kind, gv)})
}

// OlderWorkloadAPIs are the scheduling.k8s.io kinds of the Workload API
// that a supported Kubernetes release serves (behind its GenericWorkload
// feature gate) and the newest one no longer does ("group/version Kind"
// to the release): 1.35's v1alpha1 Workload held its pod groups inline;
// 1.36's v1alpha2 made PodGroup an object; 1.37 serves v1alpha3 and
// v1beta1 (k8s.io/api scheduling).
var OlderWorkloadAPIs = map[string]string{
	"scheduling.k8s.io/v1alpha1 Workload": "1.35",
	"scheduling.k8s.io/v1alpha2 Workload": "1.36",
	"scheduling.k8s.io/v1alpha2 PodGroup": "1.36",
}

// kindsOf lists the object kinds the scheme knows in one group version
// (without lists and API options), sorted.
func kindsOf(gv schema.GroupVersion) []string {
	var kinds []string
	for k := range scheme.Scheme.KnownTypes(gv) {
		if strings.HasSuffix(k, "List") || strings.HasSuffix(k, "Options") || k == "WatchEvent" || k == "Status" {
			continue
		}
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// versionsOf lists the group versions that serve a kind, sorted.
func versionsOf(group, kind string) []string {
	var out []string
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Group == group && gvk.Kind == kind && gvk.Version != runtimeInternalVersion {
			out = append(out, gvk.GroupVersion().String())
		}
	}
	sort.Strings(out)
	return out
}

const runtimeInternalVersion = "__internal"

// groupKnown says whether Kubernetes serves the API group at all.
func groupKnown(group string) bool {
	for _, gv := range scheme.Scheme.PrioritizedVersionsAllGroups() {
		if gv.Group == group {
			return true
		}
	}
	return false
}
