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
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpudratest"
)

// startCluster starts a simulated node with the shipped DeviceClasses.
func startCluster(t testing.TB, profile string) (context.Context, *Cluster) {
	t.Helper()
	return startClusterWith(t, Options{Profile: profile})
}

// startClusterWith starts a simulated node with the options, in a fresh
// directory, with the DeviceClasses applied.
func startClusterWith(t testing.TB, opts Options) (context.Context, *Cluster) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	opts.Dir = gpudratest.ShortTempDir(t)
	c, err := Start(ctx, opts, nil)
	if err != nil {
		t.Fatalf("start simulated node: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	applyClasses(ctx, t, c)
	return ctx, c
}

func applyClasses(ctx context.Context, t testing.TB, c *Cluster) {
	t.Helper()
	classes, err := LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range classes {
		if err := c.ApplyDeviceClass(ctx, dc); err != nil {
			t.Fatal(err)
		}
	}
}

// gpuClaim is a claim asking for count whole GPUs with optional CEL
// selectors and an optional matchAttribute constraint.
func gpuClaim(name string, count int64, constraint string, selectors ...string) *resourceapi.ResourceClaim {
	claim := gpudratest.Claim("default", name, gpudratest.Request("gpu", "gpu.gpudra.io", count, selectors...))
	if constraint != "" {
		attr := resourceapi.FullyQualifiedName(constraint)
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: &attr}}
	}
	return claim
}

// withConfig adds an opaque config for the driver to the claim.
func withConfig(claim *resourceapi.ResourceClaim, params string) *resourceapi.ResourceClaim {
	claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, gpudratest.Opaque("gpu.gpudra.io", params, "gpu"))
	return claim
}

// podUsing is a one-container pod that uses the named existing claims.
func podUsing(name string, claims ...string) *v1.Pod {
	return gpudratest.Pod("default", name, claims...)
}

// createAndRun creates the claim and runs a pod that uses it.
func createAndRun(ctx context.Context, t testing.TB, c *Cluster, claim *resourceapi.ResourceClaim) (*PodResult, error) {
	t.Helper()
	if _, err := c.CreateClaim(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return c.RunPod(ctx, podUsing("pod-"+claim.Name, claim.Name))
}

// allocatedDevices returns the device names the claim got.
func allocatedDevices(res *PodResult) []string {
	var out []string
	for _, pc := range res.Claims {
		for _, r := range pc.Claim.Status.Allocation.Devices.Results {
			out = append(out, r.Device)
		}
	}
	return out
}
