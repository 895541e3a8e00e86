//go:build cgo

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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/clusterstatus"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// fakeAPIServer serves lists of ResourceSlices, ResourceClaims and
// DeviceClasses as the API server does, and writes a kubeconfig whose
// context "test" points at it (the current context points nowhere).
func fakeAPIServer(t *testing.T, slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, classes []resourceapi.DeviceClass) string {
	t.Helper()
	lists := map[string]any{
		"/apis/resource.k8s.io/v1/resourceslices": &resourceapi.ResourceSliceList{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSliceList"}, Items: slices},
		"/apis/resource.k8s.io/v1/resourceclaims": &resourceapi.ResourceClaimList{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimList"}, Items: claims},
		"/apis/resource.k8s.io/v1/deviceclasses":  &resourceapi.DeviceClassList{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClassList"}, Items: classes},
		// discovery's ServerVersion: check --cluster checks as this version.
		"/version": &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.0"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/apis/resource.k8s.io/v1/namespaces/forbidden/") {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
			return
		}
		l, ok := lists[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q}
- name: nowhere
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {}
contexts:
- name: test
  context: {cluster: test, user: u, namespace: team-a}
- name: nowhere
  context: {cluster: nowhere, user: u}
current-context: nowhere
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func heldClaim(ns, name, device string) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.gpudra.io", Pool: "node-1", Device: device},
	}}}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name + "-pod", UID: "u"}}
	return c
}

// TestStatusAndCheckCluster: gpudra status and check --cluster read the
// cluster the kubeconfig's context names.
func TestStatusAndCheckCluster(t *testing.T) {
	sl, err := fakenodes.Slices(context.Background(), "dgx-h100", 1, "gpu.gpudra.io")
	if err != nil {
		t.Fatal(err)
	}
	var slices []resourceapi.ResourceSlice
	for _, s := range sl {
		slices = append(slices, *s)
	}
	claims := []resourceapi.ResourceClaim{heldClaim("team-a", "train", "gpu-0"), heldClaim("team-b", "infer", "gpu-1")}
	kubeconfig := fakeAPIServer(t, slices, claims, nil)

	code, out, errOut := runRoot(t, "gpudra", "", "status", "--kubeconfig", kubeconfig, "--context", "test", "-A", "-o", "json")
	var rep clusterstatus.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status -o json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if len(rep.Nodes) != 1 || rep.Nodes[0].GPUs[0].State != clusterstatus.StateWhole || rep.Nodes[0].GPUs[1].Holders[0].Name() != "team-b/infer" || rep.Nodes[0].Free.GPUs != 6 {
		t.Errorf("status: %+v", rep.Nodes)
	}
	// As kubectl: the context's namespace is team-a, and status shows
	// only its claims by name, without -n as with it; -n another.
	for _, args := range [][]string{nil, {"-n", "team-a"}} {
		code, out, _ = runRoot(t, "gpudra", "", append([]string{"status", "--kubeconfig", kubeconfig, "--context", "test"}, args...)...)
		if code != 0 || !strings.Contains(out, "team-a/train") || strings.Contains(out, "team-b/infer") || !strings.Contains(out, "(another namespace)") {
			t.Errorf("status %v: exit %d\n%s", args, code, out)
		}
	}
	code, out, _ = runRoot(t, "gpudra", "", "status", "--kubeconfig", kubeconfig, "--context", "test", "-n", "team-b")
	if code != 0 || !strings.Contains(out, "team-b/infer") || strings.Contains(out, "team-a/train") {
		t.Errorf("status -n team-b: exit %d\n%s", code, out)
	}
	if code, _, errOut := runRoot(t, "gpudra", "", "status", "--kubeconfig", kubeconfig, "--context", "test", "-n", "team-b", "-A"); code != exitUsage {
		t.Errorf("status -n -A: exit %d, %s; want %d", code, errOut, exitUsage)
	}
	// kubectl's flags: --request-timeout, --as.
	code, out, errOut = runRoot(t, "gpudra", "", "status", "--kubeconfig", kubeconfig, "--context", "test", "--request-timeout", "20s", "--as", "someone", "-A")
	if code != 0 || !strings.Contains(out, "team-b/infer") {
		t.Errorf("status --request-timeout --as: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runRoot(t, kubectlPluginName, "", "status", "--kubeconfig", kubeconfig, "--context", "test", "-o", "wide", "node-1")
	if code != 0 || !strings.Contains(out, "PREPARED") || !strings.Contains(out, "node-1: 6 whole GPUs") {
		t.Errorf("kubectl gpudra status -o wide node-1: exit %d\n%s", code, out)
	}
	// The current context's server is not there: exit 3.
	if code, _, errOut := runRoot(t, "gpudra", "", "status", "--kubeconfig", kubeconfig); code != exitFailure || !strings.Contains(errOut, "resourceslices") {
		t.Errorf("status on an unreachable cluster: exit %d, %s", code, errOut)
	}

	seven := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: seven, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io, allocationMode: ExactCount, count: 7}
`
	// No DeviceClasses in the cluster: nothing can be allocated.
	code, out, _ = runRoot(t, "gpudra", seven, "check", "--cluster", "--kubeconfig", kubeconfig, "--context", "test", "-")
	if code != exitNegative || !strings.Contains(out, "gpu.gpudra.io") {
		t.Errorf("check --cluster without classes: exit %d\n%s", code, out)
	}
	if code, _, errOut := runRoot(t, "gpudra", seven, "check", "--cluster", "--profile", "dgx-h100", "-"); code != exitUsage || !strings.Contains(errOut, "leave out --profile") {
		t.Errorf("check --cluster --profile: exit %d, %s", code, errOut)
	}

	// With the chart's classes: two of eight GPUs are held, so seven do
	// not fit right now and six do.
	shipped, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
	if err != nil {
		t.Fatal(err)
	}
	var classes []resourceapi.DeviceClass
	for _, o := range shipped.Classes {
		classes = append(classes, *o.Obj.(*resourceapi.DeviceClass))
	}
	kubeconfig = fakeAPIServer(t, slices, claims, classes)
	code, out, _ = runRoot(t, "gpudra", seven, "check", "--cluster", "--kubeconfig", kubeconfig, "--context", "test", "-")
	if code != exitNegative || !strings.Contains(out, "2 allocated claims holding devices") {
		t.Errorf("check --cluster, seven GPUs: exit %d\n%s", code, out)
	}
	six := strings.Replace(seven, "count: 7", "count: 6", 1)
	if code, out, _ = runRoot(t, "gpudra", six, "check", "--cluster", "--kubeconfig", kubeconfig, "--context", "test", "-"); code != 0 || !strings.Contains(out, "ALLOCATED on node-1") || strings.Contains(out, "gpu-0,") || !strings.Contains(out, "Kubernetes 1.37 (the API server's version)") {
		t.Errorf("check --cluster, six GPUs: exit %d\n%s", code, out)
	}
}
