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
	"fmt"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
)

// migRequest asks for one MIG partition of the profile through its
// per-profile DeviceClass, or any partition matching the selectors through
// mig.gpudra.io when profile is empty.
func migRequest(name, profile string, selectors ...string) resourceapi.DeviceRequest {
	class := "mig.gpudra.io"
	if profile != "" {
		class = "mig-" + profile + ".gpudra.io"
	}
	req := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}}
	for _, s := range selectors {
		req.Exactly.Selectors = append(req.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return req
}

// migClaim is a claim for one partition per profile given, all on one GPU
// when sameGPU is set (matchAttribute on parentUUID).
func migClaim(name string, sameGPU bool, profiles ...string) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	var names []string
	for i, p := range profiles {
		n := fmt.Sprintf("mig%d", i)
		names = append(names, n)
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, migRequest(n, p))
	}
	if sameGPU {
		attr := resourceapi.FullyQualifiedName("gpu.gpudra.io/parentUUID")
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: names, MatchAttribute: &attr}}
	}
	return claim
}

// podUsingAll is a pod whose one container uses every request of the claim.
func runClaim(ctx context.Context, t testing.TB, c *Cluster, claim *resourceapi.ResourceClaim) (*PodResult, error) {
	t.Helper()
	if _, err := c.CreateClaim(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return c.RunPod(ctx, podUsing("pod-"+claim.Name, claim.Name))
}

// hardware is what the fake GPUs hold now, read as a second process on
// the node would: MIG mode and instances per GPU.
func hardware(t testing.TB, c *Cluster) gpu.Node {
	t.Helper()
	s := nodeNVML(t, c)
	defer s.Shutdown()
	node, err := discovery.Discover(context.Background(), s, c.Opts.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// instancesOn describes the MIG instances of the node as
// "gpu-<minor>:<profile>@<start>", sorted; with MIG mode on it adds
// "gpu-<minor>:mig-on".
func instancesOn(node gpu.Node) []string {
	var out []string
	for _, g := range node.GPUs {
		if g.MIG == nil {
			continue
		}
		if g.MigEnabled {
			out = append(out, fmt.Sprintf("%s:mig-on", g.DeviceName()))
		}
		for _, inst := range g.MIG.Instances {
			p, _ := g.MIG.ProfileByID(inst.ProfileID)
			out = append(out, fmt.Sprintf("%s:%s@%d", g.DeviceName(), p.Name, inst.Placement.Start))
		}
	}
	sort.Strings(out)
	return out
}

// expectedInstances is instancesOn for the MIG devices of the claims.
func expectedInstances(t testing.TB, c *Cluster, claims ...*resourceapi.ResourceClaim) []string {
	t.Helper()
	node := c.Driver.Node()
	seen := map[string]bool{}
	var out []string
	for _, claim := range claims {
		for _, r := range claim.Status.Allocation.Devices.Results {
			md, ok := node.MigDeviceByName(r.Device)
			if !ok {
				continue
			}
			on := md.Parent.DeviceName() + ":mig-on"
			if !seen[on] {
				seen[on] = true
				out = append(out, on)
			}
			out = append(out, fmt.Sprintf("%s:%s@%d", md.Parent.DeviceName(), md.Profile.Name, md.Placement.Start))
		}
	}
	sort.Strings(out)
	return out
}

// envWithPrefix returns the container's variables that start with prefix.
func envWithPrefix(ctr Container, prefix string) []string {
	var out []string
	for _, e := range ctr.Env {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}
