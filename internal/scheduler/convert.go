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
	"encoding/json"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// convert reads a resource.k8s.io object of another version than v1 as the
// v1 object the API server would store: v1beta2 has v1's shape; v1beta1
// (and Kubernetes 1.31's v1alpha3, which has v1beta1's shape) keeps a
// request's fields beside its name instead of under "exactly", and a
// device's beside its name under "basic". The object is first decoded
// strictly in its own version, so misspelt fields are reported against
// the schema the user wrote to; fields v1 has no place for
// are dropped, as the API server's conversion drops them. A note says that
// the cluster wants v1.
func (m *Manifests) convert(src Source, gvk schema.GroupVersionKind, name string, js []byte) (runtime.Object, bool) {
	object := strings.TrimSpace(gvk.Kind + " " + name)
	from := gvk.Version
	switch {
	case gvk.Version == "v1alpha2" || gvk.Version == "v1alpha1":
		m.problem(ProblemInvalid, src, object, "apiVersion", fmt.Sprintf("%s is the classic DRA API of Kubernetes 1.26–1.30 (ResourceClass, ResourceClaimParameters, PodSchedulingContext); no Kubernetes release gpudra supports serves it", gvk.GroupVersion()),
			"rewrite the object for resource.k8s.io/v1 (Kubernetes 1.34+): a ResourceClass becomes a DeviceClass with CEL selectors, parameters become requests with selectors and opaque config")
		return nil, false
	case gvk.Version == "v1alpha3" && !scheme.Scheme.Recognizes(gvk):
		// Kubernetes 1.31's structured parameters, the shape v1beta1 kept.
		from = "v1beta1"
	}
	srcGVK := schema.GroupVersionKind{Group: gvk.Group, Version: from, Kind: gvk.Kind}
	if !scheme.Scheme.Recognizes(srcGVK) {
		m.unknownKind(src, gvk, name)
		return nil, false
	}
	var u map[string]any
	if err := json.Unmarshal(js, &u); err != nil {
		m.problem(ProblemInvalid, src, object, "", err.Error(), "")
		return nil, false
	}
	// Strictly in the version written: misspelt fields are reported
	// against the schema the user wrote to.
	u["apiVersion"] = srcGVK.GroupVersion().String()
	raw, _ := json.Marshal(u)
	if _, ok := m.decode(src, object, raw); !ok {
		return nil, false
	}
	// Then the user's own fields moved where v1 has them, read leniently:
	// what v1 does not know was reported above.
	delete(u, "status") // what the scheduler decided earlier is no input
	u["apiVersion"] = resourceapi.SchemeGroupVersion.String()
	if from == "v1beta1" {
		v1beta1ToV1(gvk.Kind, u)
	}
	raw, _ = json.Marshal(u)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		m.problem(ProblemInvalid, src, object, "", fmt.Sprintf("cannot be converted to resource.k8s.io/v1: %v", err), "")
		return nil, false
	}
	note := fmt.Sprintf("read as resource.k8s.io/v1 (converted from %s as the API server does)", gvk.GroupVersion())
	if from != gvk.Version {
		note = fmt.Sprintf("read as resource.k8s.io/v1 (%s of Kubernetes 1.31 has the shape of v1beta1, converted from that)", gvk.GroupVersion())
	}
	m.Problems = append(m.Problems, Problem{Kind: ProblemConverted, Note: true, Source: src.At("apiVersion"), Object: object, Field: "apiVersion", GVK: gvk,
		Message: note + "; clusters serve resource.k8s.io/v1 from Kubernetes 1.34 on, and recent ones serve no beta version unless an admin enables it",
		Hint:    "write apiVersion: resource.k8s.io/v1 (requests keep their fields under exactly:, devices have no basic:)"})
	return obj, true
}

// v1beta1ToV1 moves the fields of a v1beta1 object where v1 has them.
func v1beta1ToV1(kind string, u map[string]any) {
	switch kind {
	case "ResourceClaim":
		requestsToV1(dig(u, "spec", "devices"))
	case "ResourceClaimTemplate":
		requestsToV1(dig(u, "spec", "spec", "devices"))
	case "ResourceSlice":
		spec, _ := u["spec"].(map[string]any)
		devices, _ := spec["devices"].([]any)
		for _, d := range devices {
			dev, _ := d.(map[string]any)
			basic, _ := dev["basic"].(map[string]any)
			delete(dev, "basic")
			for k, v := range basic {
				dev[k] = v
			}
		}
	}
}

// requestsToV1: every field of a v1beta1 request but its name and
// firstAvailable goes under exactly, when any is set (as the API server's
// conversion does).
func requestsToV1(devices map[string]any) {
	requests, _ := devices["requests"].([]any)
	for _, r := range requests {
		req, _ := r.(map[string]any)
		exactly := map[string]any{}
		for k, v := range req {
			if k != "name" && k != "firstAvailable" {
				exactly[k] = v
				delete(req, k)
			}
		}
		if len(exactly) > 0 {
			req["exactly"] = exactly
		}
	}
}

func dig(u map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		u, _ = u[k].(map[string]any)
	}
	return u
}
