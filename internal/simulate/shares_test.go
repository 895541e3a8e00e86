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
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// twoSharesClaim asks for two shares of memory of one GPU (two requests,
// both confined to gpu-0), with an optional claim-wide sharing section.
func twoSharesClaim(name, memA, memB, sharing string) *resourceapi.ResourceClaim {
	claim := shareClaim(name, memA, "", "")
	second := *claim.Spec.Devices.Requests[0].DeepCopy()
	second.Name = "gpu-b"
	second.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memB)}}
	claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, second)
	for i := range claim.Spec.Devices.Requests {
		claim.Spec.Devices.Requests[i].Exactly.Selectors = selectors("device.attributes['gpu.gpudra.io'].minor == 0")
	}
	if sharing != "" {
		withConfig(claim, `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+sharing+`}`)
		claim.Spec.Devices.Config[0].Requests = nil // both requests
	}
	return claim
}

// TestTwoSharesOfOneGPUInOneClaim: a claim whose two requests the
// allocator satisfies with two shares of one GPU (KEP-5075 gives each its
// own share ID) is preparable under every pool sharing: its container
// gets the GPU once, with the sum of the shares as its MPS limits, and
// everything is undone when it goes.
func TestTwoSharesOfOneGPUInOneClaim(t *testing.T) {
	for _, tc := range []struct {
		pool, sharing string
		wantPinned    string // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, "" for none
	}{
		{pool: "None"},
		{pool: "MPS", wantPinned: "0=30720M"},
		{pool: "TimeSlicing"},
		{pool: "None", sharing: mpsSharing, wantPinned: "0=30720M"},
		{pool: "None", sharing: tsLong},
	} {
		t.Run(tc.pool+"/"+strings.ReplaceAll(tc.sharing, "\"", ""), func(t *testing.T) {
			t.Parallel()
			ctx, c := startSharedCluster(t, "dgx-h100", tc.pool)
			res, err := createAndRun(ctx, t, c, twoSharesClaim("two-shares", "10Gi", "20Gi", tc.sharing))
			if err != nil {
				t.Fatal(err)
			}
			results := res.Claims[0].Claim.Status.Allocation.Devices.Results
			if len(results) != 2 || results[0].Device != "gpu-0" || results[1].Device != "gpu-0" ||
				results[0].ShareID == nil || results[1].ShareID == nil || *results[0].ShareID == *results[1].ShareID {
				t.Fatalf("the allocator did not give two shares of gpu-0: %+v", results)
			}
			ctr := res.Containers[0]
			if got := ctr.FakeDevices(); len(got) != 1 || got[0] != uuidOf(t, c, "gpu-0") {
				t.Errorf("the container sees GPUs %v, want gpu-0 once", got)
			}
			if len(ctr.CDIDevices) != 1 {
				t.Errorf("the container got CDI devices %v, want one", ctr.CDIDevices)
			}
			devs := res.Claims[0].Devices
			if len(devs) != 1 || !slices.Equal(sorted(devs[0].RequestNames), []string{"gpu", "gpu-b"}) {
				t.Errorf("the plugin answered devices %v, want gpu-0 once for both requests", devs)
			}
			got, _ := ctr.EnvValue("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
			if got != tc.wantPinned {
				t.Errorf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%q, want %q (the sum of the shares)", got, tc.wantPinned)
			}
			uuid := uuidOf(t, c, "gpu-0")
			stopPod(ctx, t, c, res)
			if got := daemons(t, c); len(got) != 0 {
				t.Errorf("daemons %v left", got)
			}
			if p := policyOf(t, c, uuid); p.computeMode != 0 || p.timeSlice != 0 {
				t.Errorf("GPU left in %s", describe(p))
			}
			if n := len(c.Driver.State().PreparedClaims()); n != 0 {
				t.Errorf("%d claims still recorded", n)
			}
		})
	}
}

// prepareStale prepares a claim whose allocation was written by hand (a
// stale, hand-written or buggy one, not the scheduler's): one share of
// gpu-0 with the given memory, and its share ID; "" allocates it whole.
func prepareStale(ctx context.Context, t *testing.T, c *Cluster, name, memory, shareID string) string {
	t.Helper()
	claim, err := c.CreateClaim(ctx, shareClaim(name, memory, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	result := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: c.Opts.DriverName, Pool: c.Opts.NodeName, Device: "gpu-0"}
	if shareID != "" {
		result.ShareID = ptr.To(types.UID(shareID))
	}
	if memory != "" {
		result.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result}}}
	if claim, err = c.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.NodePrepareResources(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Claims[string(claim.UID)].Error
}

// TestStaleSharesRefused: the scheduler never over-subscribes a GPU, but
// an allocation it did not make can say anything. The node prepares shares
// only while they fit the GPU beside the others, never one of nothing or
// of more than the GPU, and none on a node that does not publish shares.
func TestStaleSharesRefused(t *testing.T) {
	for _, pool := range []string{"None", "MPS"} {
		t.Run("pool "+pool, func(t *testing.T) {
			t.Parallel()
			ctx, c := startSharedCluster(t, "dgx-h100", pool)
			for i, share := range []string{"30Gi", "30Gi"} {
				if msg := prepareStale(ctx, t, c, fmt.Sprintf("fits-%d", i), share, fmt.Sprintf("share-%d", i)); msg != "" {
					t.Fatalf("a share that fits was refused: %s", msg)
				}
			}
			for name, tc := range map[string]struct{ memory, want string }{
				"third-30Gi": {"30Gi", "does not fit: other claims hold"},
				"1Ti":        {"1Ti", "more than the GPU's"},
				"zero":       {"0", "below the smallest share of 1Mi"},
				"no-memory":  {"", "without a share of its memory"},
			} {
				msg := prepareStale(ctx, t, c, name, tc.memory, "share-"+name)
				if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "gpu-0") {
					t.Errorf("share %s: prepare said %q, want a refusal that says %q", name, msg, tc.want)
				}
			}
			if n := len(c.Driver.State().PreparedClaims()); n != 2 {
				t.Errorf("%d claims recorded, want the 2 that fit", n)
			}
		})
	}
	t.Run("node without consumable capacity", func(t *testing.T) {
		t.Parallel()
		ctx, c := startCluster(t, "dgx-h100")
		if msg := prepareStale(ctx, t, c, "share-a", "10Gi", "share-a"); !strings.Contains(msg, "publishes its GPUs exclusive") {
			t.Errorf("a share on a node of exclusive GPUs: %q", msg)
		}
		if msg := prepareStale(ctx, t, c, "share-b", "10Gi", "share-b"); !strings.Contains(msg, "publishes its GPUs exclusive") {
			t.Errorf("a second share on a node of exclusive GPUs: %q", msg)
		}
		if n := len(c.Driver.State().PreparedClaims()); n != 0 {
			t.Errorf("%d claims recorded on one exclusive GPU", n)
		}
	})
}
