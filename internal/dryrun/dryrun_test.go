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

package dryrun

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// fakeAPIServer serves the discovery of pods, namespaces, claims and
// classes, answers server-side applies, and rejects the claim named
// "rejected" as the API server rejects an invalid object; it records
// every write it gets.
type fakeAPIServer struct {
	mu     sync.Mutex
	writes []*http.Request
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	list := func(gv string, resources ...string) string {
		var rs []string
		for _, r := range resources {
			name, rest, _ := strings.Cut(r, ":")
			kind, scope, _ := strings.Cut(rest, ":")
			rs = append(rs, `{"name":"`+name+`","kind":"`+kind+`","namespaced":`+scope+`,"verbs":["create","get","patch"]}`)
		}
		return `{"kind":"APIResourceList","groupVersion":"` + gv + `","resources":[` + strings.Join(rs, ",") + `]}`
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/version":
		io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/api":
		io.WriteString(w, `{"kind":"APIVersions","versions":["v1"]}`)
	case r.Method == http.MethodGet && r.URL.Path == "/apis":
		io.WriteString(w, `{"kind":"APIGroupList","groups":[{"name":"resource.k8s.io","versions":[{"groupVersion":"resource.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"resource.k8s.io/v1","version":"v1"}}]}`)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1":
		io.WriteString(w, list("v1", "pods:Pod:true", "namespaces:Namespace:false"))
	case r.Method == http.MethodGet && r.URL.Path == "/apis/resource.k8s.io/v1":
		io.WriteString(w, list("resource.k8s.io/v1", "resourceclaims:ResourceClaim:true", "deviceclasses:DeviceClass:false"))
	case r.Method == http.MethodPatch:
		f.mu.Lock()
		f.writes = append(f.writes, r)
		f.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/resourceclaims/rejected"):
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,
				"message":"ResourceClaim.resource.k8s.io \"rejected\" is invalid: spec.devices.requests[0].name: Invalid value: \"GPU_0\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters",
				"details":{"name":"rejected","group":"resource.k8s.io","kind":"ResourceClaim","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"GPU_0\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters","field":"spec.devices.requests[0].name"}]}}`)
		case strings.Contains(r.URL.Path, "/namespaces/new/"):
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"namespaces \"new\" not found","details":{"name":"new","kind":"namespaces"}}`)
		default:
			w.Write(body)
		}
	default:
		http.NotFound(w, r)
	}
}

func TestApply(t *testing.T) {
	fake := &fakeAPIServer{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	in := &scheduler.Manifests{}
	if err := in.Add("in.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: good}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: rejected}
spec:
  devices:
    requests:
    - name: GPU_0
      exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: v1
kind: Namespace
metadata: {name: new}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: in-new, namespace: new}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: old}
spec: {spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.gpudra.io}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec: {driver: gpu.gpudra.io, nodeName: n, pool: {name: n, generation: 1, resourceSliceCount: 1}}
`)); err != nil {
		t.Fatal(err)
	}
	found, err := Apply(context.Background(), &rest.Config{Host: srv.URL}, in)
	if err != nil {
		t.Fatal(err)
	}
	byObject := map[string]check.Finding{}
	for _, f := range found {
		byObject[f.Object] = f
	}
	if f, ok := byObject["ResourceClaim default/rejected"]; !ok || f.Severity != check.SeverityError || f.Field != "spec.devices.requests[0].name" || f.Source.Line != 16 || !strings.Contains(f.Message, `"GPU_0"`) {
		t.Errorf("the rejected claim: %+v", f)
	}
	if f, ok := byObject["ResourceClaim new/in-new"]; !ok || f.Severity != check.SeverityNote || !strings.Contains(f.Message, "namespace new is among the inputs") {
		t.Errorf("a claim in a namespace of the inputs: %+v", f)
	}
	if f, ok := byObject["Gadget g"]; !ok || f.Severity != check.SeverityError || !strings.Contains(f.Message, "serves no Gadget in example.com/v1") {
		t.Errorf("a kind the server does not serve: %+v", f)
	}
	// Named as gpudra check names it, in the default namespace.
	if f, ok := byObject["ResourceClaimTemplate default/old"]; !ok || f.Field != "apiVersion" || !strings.Contains(f.Message, "serves no ResourceClaimTemplate in resource.k8s.io/v1beta1") {
		t.Errorf("a version the server does not serve: %+v", f)
	}
	if len(found) != 4 {
		t.Errorf("want 4 findings, got %d: %+v", len(found), found)
	}
	// Every write is a dry run by server-side apply, and the inventory is
	// not sent.
	for _, r := range fake.writes {
		q := r.URL.Query()
		if q.Get("dryRun") != "All" || q.Get("fieldManager") != FieldManager || r.Header.Get("Content-Type") != "application/apply-patch+yaml" {
			t.Errorf("%s %s (%s): not a server-side apply dry run", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		if strings.Contains(r.URL.Path, "resourceslices") {
			t.Errorf("the inventory was sent: %s", r.URL)
		}
	}
	if len(fake.writes) != 4 { // good, rejected, the namespace, in-new
		t.Errorf("%d writes, want 4", len(fake.writes))
	}
}
