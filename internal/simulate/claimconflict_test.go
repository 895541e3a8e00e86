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
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestClaimWithConflictingDevices: an allocation whose own devices
// overlap (a stale or hand-written allocation, a scheduler bug) is refused
// before anything is created, whatever the order of its devices, and the
// GPUs are left as they were. (Before, [gpu-6, gpu-6-mig-1g10gb-0] was
// prepared: the whole GPU was handed out and MIG mode switched on under
// it; only the reverse order failed.)
func TestClaimWithConflictingDevices(t *testing.T) {
	tests := []struct {
		name    string
		devices []string
		// wantErr are the words the error must contain; none means the
		// claim is prepared.
		wantErr []string
	}{
		{name: "a GPU and its own partition", devices: []string{"gpu-6", "gpu-6-mig-1g10gb-0"},
			wantErr: []string{`"gpu-6-mig-1g10gb-0"`, `"gpu-6"`, "is a partition of"}},
		{name: "a partition and its own GPU", devices: []string{"gpu-6-mig-1g10gb-0", "gpu-6"},
			wantErr: []string{`"gpu-6"`, `"gpu-6-mig-1g10gb-0"`, "is a partition of"}},
		{name: "one GPU twice", devices: []string{"gpu-6", "gpu-6"},
			wantErr: []string{`"gpu-6"`, "twice"}},
		{name: "one partition twice", devices: []string{"gpu-6-mig-1g10gb-0", "gpu-6-mig-1g10gb-0"},
			wantErr: []string{`"gpu-6-mig-1g10gb-0"`, "twice"}},
		{name: "overlapping partitions", devices: []string{"gpu-6-mig-2g20gb-0", "gpu-6-mig-1g10gb-1"},
			wantErr: []string{`"gpu-6-mig-1g10gb-1"`, `"gpu-6-mig-2g20gb-0"`, "overlap"}},
		{name: "partitions side by side are fine", devices: []string{"gpu-6-mig-1g10gb-0", "gpu-6-mig-1g10gb-1", "gpu-5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := startCluster(t, "dgx-h100")
			before := instancesOn(hardware(t, c))
			claim := handAllocated(t, c, tc.devices...)
			resp, err := c.NodePrepareResources(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Claims[string(claim.UID)]
			if len(tc.wantErr) == 0 {
				if r.Error != "" {
					t.Fatalf("prepare failed: %s", r.Error)
				}
				return
			}
			if r.Error == "" {
				t.Fatalf("prepare of %v succeeded with devices %v, want an error", tc.devices, r.Devices)
			}
			for _, want := range append(tc.wantErr, claim.Name) {
				if !strings.Contains(r.Error, want) {
					t.Errorf("error does not say %s: %s", want, r.Error)
				}
			}
			if after := instancesOn(hardware(t, c)); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("hardware changed by a refused prepare: %v -> %v", before, after)
			}
			assertNothingPrepared(t, c)
		})
	}
}

// handAllocated stores a claim with one request per device and an
// allocation of exactly those devices, as a stale or hand-written
// allocation would be; the scheduler would not produce it.
func handAllocated(t *testing.T, c *Cluster, devices ...string) *resourceapi.ResourceClaim {
	t.Helper()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hand-made", UID: types.UID("uid-hand-made")}}
	alloc := &resourceapi.AllocationResult{}
	for i, d := range devices {
		req := string(rune('a' + i))
		class := "gpu.gpudra.io"
		if strings.Contains(d, "-mig-") {
			class = "mig.gpudra.io"
		}
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name: req, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		})
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: req, Driver: c.Opts.DriverName, Pool: c.Opts.NodeName, Device: d,
		})
	}
	ctx := t.Context()
	created, err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Allocation = alloc
	created.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod", UID: "uid-pod"}}
	created, err = c.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}
