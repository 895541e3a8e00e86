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

package simulate

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTwelveLargeInvalidConfigsInOnePod: a pod with twelve claims, each
// with a config at the API server's 10 KiB limit and a problem in every
// entry, gets one NodePrepareResources response with every claim's error
// in it, each naming the field, far under the 4 MiB gRPC limit. (Before,
// the response was 4.6 MB: the kubelet got ResourceExhausted and the user
// lost the field that was wrong.)
func TestTwelveLargeInvalidConfigsInOnePod(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	entries := make([]string, 2538) // 10,238 bytes of config
	for i := range entries {
		entries[i] = `"x"`
	}
	params := `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":[` + strings.Join(entries, ",") + `]}`
	if len(params) > 10*1024 {
		t.Fatalf("config is %d bytes, over the API server's limit", len(params))
	}
	first, err := c.CreateClaim(ctx, withConfig(gpuClaim("big-0", 1, ""), params))
	if err != nil {
		t.Fatal(err)
	}
	if first, err = c.Allocate(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The other eleven carry the same allocation: the config is rejected
	// before the device is looked at, so the overlap does not matter.
	claims := []*resourceapi.ResourceClaim{first}
	for i := 1; i < 12; i++ {
		cl := first.DeepCopy()
		cl.ObjectMeta = metav1.ObjectMeta{Namespace: first.Namespace, Name: fmt.Sprintf("big-%d", i), UID: types.UID(fmt.Sprintf("uid-big-%d", i))}
		created, err := c.Client.ResourceV1().ResourceClaims(cl.Namespace).Create(ctx, cl, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = first.Status
		if created, err = c.Client.ResourceV1().ResourceClaims(cl.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, created)
	}

	resp, err := c.NodePrepareResources(ctx, claims...)
	if err != nil {
		t.Fatalf("NodePrepareResources for twelve claims with large invalid configs: %v", err)
	}
	if size := proto.Size(resp); size > 64*1024 {
		t.Errorf("response is %d bytes, want far under the 4 MiB gRPC limit (at most 64 KiB)", size)
	}
	for _, cl := range claims {
		r := resp.Claims[string(cl.UID)]
		if r == nil || r.Error == "" {
			t.Errorf("claim %s: no error in the response", cl.Name)
			continue
		}
		for _, want := range []string{cl.Name, "spec.devices.config[0].opaque", "parameters.driverCapabilities[0]", "first 10 of 2538 errors"} {
			if !strings.Contains(r.Error, want) {
				t.Errorf("claim %s: error does not say %q: %.400s", cl.Name, want, r.Error)
			}
		}
	}
	assertNothingPrepared(t, c)
}
