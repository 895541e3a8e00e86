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
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/gpudratest"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// waitClaimStatus polls the claim until cond holds for its status.devices.
func waitClaimStatus(ctx context.Context, t *testing.T, c *Cluster, claim *resourceapi.ResourceClaim, what string, cond func([]resourceapi.AllocatedDeviceStatus) bool) []resourceapi.AllocatedDeviceStatus {
	t.Helper()
	var devices []resourceapi.AllocatedDeviceStatus
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		devices = got.Status.Devices
		return cond(devices), nil
	})
	if err != nil {
		t.Fatalf("claim %s: status.devices never became %s: %+v", claim.Name, what, devices)
	}
	return devices
}

// TestClaimStatusDevices: a prepared claim's status.devices names each
// device's GPU or MIG UUID, PCI bus ID, MIG placement and sharing, with a
// Ready condition; unprepare removes the entries.
func TestClaimStatusDevices(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	gpus := map[string]string{} // device name -> UUID
	for _, g := range c.Driver.Node().GPUs {
		gpus[g.DeviceName()] = g.UUID
	}

	whole := withConfig(gpuClaim("whole", 1, ""), `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","utility","video"],"sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`)
	res, err := createAndRun(ctx, t, c, whole)
	if err != nil {
		t.Fatal(err)
	}
	devs := waitClaimStatus(ctx, t, c, whole, "written", func(d []resourceapi.AllocatedDeviceStatus) bool { return len(d) == 1 })
	d := devs[0]
	alloc := res.Claims[0].Claim.Status.Allocation.Devices.Results[0]
	if d.Driver != "gpu.gpudra.io" || d.Pool != alloc.Pool || d.Device != alloc.Device {
		t.Errorf("entry %s/%s/%s, allocation %s/%s/%s", d.Driver, d.Pool, d.Device, alloc.Driver, alloc.Pool, alloc.Device)
	}
	if len(d.Conditions) != 1 || d.Conditions[0].Type != "Ready" || d.Conditions[0].Status != metav1.ConditionTrue || !strings.Contains(d.Conditions[0].Message, "k8s.gpu.gpudra.io/claim=") {
		t.Errorf("conditions %+v", d.Conditions)
	}
	st, err := configapi.DecodeDeviceStatus(d.Data.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if st.UUID != gpus[alloc.Device] || !strings.HasPrefix(st.PCIBusID, "0000:") || st.ProductName != "NVIDIA H100 80GB HBM3" || st.MIG != nil {
		t.Errorf("whole GPU status %+v", st)
	}
	if st.Sharing == nil || st.Sharing.Strategy != configapi.TimeSlicingStrategy || st.Sharing.TimeSliceInterval != configapi.LongTimeSlice {
		t.Errorf("sharing %+v", st.Sharing)
	}
	if strings.Join(st.DriverCapabilities, ",") != "compute,utility,video" {
		t.Errorf("driver capabilities %v", st.DriverCapabilities)
	}

	mig := migClaim("mig", false, "1g.10gb")
	migRes, err := createAndRun(ctx, t, c, mig)
	if err != nil {
		t.Fatal(err)
	}
	devs = waitClaimStatus(ctx, t, c, mig, "written", func(d []resourceapi.AllocatedDeviceStatus) bool { return len(d) == 1 })
	st, err = configapi.DecodeDeviceStatus(devs[0].Data.Raw)
	if err != nil {
		t.Fatal(err)
	}
	migAlloc := migRes.Claims[0].Claim.Status.Allocation.Devices.Results[0]
	parent := migAlloc.Device[:strings.Index(migAlloc.Device, "-mig-")]
	if !strings.HasPrefix(st.UUID, "MIG-") || st.ParentUUID != gpus[parent] || st.MIG == nil || st.MIG.Profile != "1g.10gb" || st.MIG.GPUInstanceID == nil {
		t.Errorf("MIG status %+v (%+v)", st, st.MIG)
	}
	if want := fmt.Sprintf("%s-mig-1g10gb-%d", parent, st.MIG.PlacementStart); migAlloc.Device != want {
		t.Errorf("placement %d, device %s", st.MIG.PlacementStart, migAlloc.Device)
	}
	env := strings.Join(migRes.Containers[0].Env, " ")
	if !strings.Contains(env, "="+st.UUID) {
		t.Errorf("the status's MIG UUID %s is not the one the container got: %s", st.UUID, env)
	}

	// Unprepared: the entries go (the claim stays allocated).
	if err := c.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	waitClaimStatus(ctx, t, c, whole, "removed", func(d []resourceapi.AllocatedDeviceStatus) bool { return len(d) == 0 })
	if got, _ := c.Client.ResourceV1().ResourceClaims("default").Get(ctx, "whole", metav1.GetOptions{}); got.Status.Allocation == nil {
		t.Error("the claim lost its allocation")
	}
	s := gpudratest.Gather(t, c.Driver.Registry())
	if n, _ := s.Value(t, "gpudra_plugin_claim_status_writes_total", "result=success"); n < 3 {
		t.Errorf("%v successful status writes, want at least 3", n)
	}
	if n, ok := s.Value(t, "gpudra_plugin_claim_status_writes_total", "result=error"); !ok || n != 0 {
		t.Errorf("failed status writes: %v (exported: %v), want 0", n, ok)
	}
}
