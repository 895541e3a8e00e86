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
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nodestate"
)

var (
	metav1GetOptions    = metav1.GetOptions{}
	metav1DeleteOptions = metav1.DeleteOptions{}
)

// TestMigOnDemand: a pod asking for a 1g.10gb partition gets exactly that
// MIG device, created at the allocated placement on a GPU whose MIG mode
// the plugin switched on; its container sees the MIG UUID; deleting the
// pod destroys the instance and switches MIG mode off again.
func TestMigOnDemand(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := runClaim(ctx, t, c, migClaim("one-mig", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	devs := allocatedDevices(res)
	if len(devs) != 1 || !strings.HasPrefix(devs[0], "gpu-") || !strings.Contains(devs[0], "-mig-1g10gb-") {
		t.Fatalf("allocated %v, want one gpu-<minor>-mig-1g10gb-<start>", devs)
	}
	md, ok := c.Driver.Node().MigDeviceByName(devs[0])
	if !ok {
		t.Fatalf("%s is not a published MIG placement", devs[0])
	}
	hw := hardware(t, c)
	if got, want := instancesOn(hw), expectedInstances(t, c, res.Claims[0].Claim); !reflect.DeepEqual(got, want) {
		t.Fatalf("hardware holds %v, want %v", got, want)
	}
	ctr := res.Containers[0]
	seen := ctr.FakeDevices()
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "MIG-") {
		t.Fatalf("container sees %v, want one MIG device", seen)
	}
	uuid := seen[0]
	if got := envWithPrefix(ctr, "GPUDRA_FAKE_MIG_"); len(got) != 1 || !strings.HasSuffix(got[0], "="+uuid) ||
		!strings.HasPrefix(got[0], fmt.Sprintf("GPUDRA_FAKE_MIG_%d_", md.Parent.Minor)) {
		t.Errorf("per-device variables %v, want one for the MIG device %s", got, uuid)
	}
	if v, _ := ctr.EnvValue("NVIDIA_DRIVER_CAPABILITIES"); v != "compute,utility" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %q", v)
	}

	if err := c.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("after the pod is gone the hardware holds %v, want nothing (instance destroyed, MIG mode off)", got)
	}
	assertNothingPrepared(t, c)
}

// TestMigAnyWithMemory: "any MIG partition with at least 20Gi" gets one,
// the smallest that fits first in slice order.
func TestMigAnyWithMemory(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	claim := migClaim("big-enough", false, "")
	claim.Spec.Devices.Requests[0] = migRequest("mig0", "", "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('20Gi')) >= 0")
	res, err := runClaim(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	md, ok := c.Driver.Node().MigDeviceByName(allocatedDevices(res)[0])
	if !ok || md.Profile.MemoryBytes < 20<<30 {
		t.Fatalf("got %+v, want a partition with at least 20Gi", md)
	}
}

// TestMigThreeProfilesOneGPU: 4g + 2g + 1g with matchAttribute on
// parentUUID land on one GPU, at placements that do not overlap, and all
// three are created (NVIDIA's driver mis-places this mix).
func TestMigThreeProfilesOneGPU(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	// A partition elsewhere first, so that the first GPU is not empty.
	if _, err := runClaim(ctx, t, c, migClaim("first", false, "3g.40gb")); err != nil {
		t.Fatal(err)
	}
	res, err := runClaim(ctx, t, c, migClaim("mix", true, "4g.40gb", "2g.20gb", "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	node := c.Driver.Node()
	parents := map[string]bool{}
	var placed []gpu.MigPlacement
	for _, d := range allocatedDevices(res) {
		md, ok := node.MigDeviceByName(d)
		if !ok {
			t.Fatalf("%s is not a MIG placement", d)
		}
		parents[md.Parent.UUID] = true
		for _, p := range placed {
			if p.Overlaps(md.Placement) {
				t.Errorf("placements overlap: %v", allocatedDevices(res))
			}
		}
		placed = append(placed, md.Placement)
	}
	if len(parents) != 1 || len(placed) != 3 {
		t.Fatalf("devices %v on %d GPUs, want three on one", allocatedDevices(res), len(parents))
	}
	// One container using three requests gets all three devices' edits.
	if got := envWithPrefix(res.Containers[0], "GPUDRA_FAKE_MIG_"); len(got) != 3 {
		t.Errorf("per-device variables %v, want three MIG devices", got)
	}
	all, _ := c.Client.ResourceV1().ResourceClaims("default").Get(ctx, "first", metav1GetOptions)
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, all, res.Claims[0].Claim); !reflect.DeepEqual(got, want) {
		t.Errorf("hardware holds %v, want %v", got, want)
	}
}

// TestWholeGPUAndMigNeverShare: the counters keep whole-GPU and MIG claims
// apart. With a partition on one GPU, seven whole GPUs fit and the eighth
// does not; once the partition is released, it does.
func TestWholeGPUAndMigNeverShare(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	mig, err := runClaim(ctx, t, c, migClaim("part", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	md, _ := c.Driver.Node().MigDeviceByName(allocatedDevices(mig)[0])
	whole, err := runClaim(ctx, t, c, gpuClaim("seven", 7, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range allocatedDevices(whole) {
		if d == md.Parent.DeviceName() {
			t.Fatalf("whole GPU %s handed out while partition %s is on it", d, md.Name())
		}
	}
	if _, err := runClaim(ctx, t, c, gpuClaim("eighth", 1, "")); !errors.Is(err, ErrUnschedulable) {
		t.Fatalf("eighth whole GPU: %v, want unschedulable", err)
	}
	// And no partition fits on the seven whole GPUs.
	if _, err := runClaim(ctx, t, c, migClaim("on-whole", false, "7g.80gb")); !errors.Is(err, ErrUnschedulable) {
		t.Fatalf("7g.80gb with seven whole GPUs and a 1g on the eighth: %v, want unschedulable", err)
	}
	if err := c.StopPod(ctx, mig); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.ResourceV1().ResourceClaims("default").Delete(ctx, "part", metav1DeleteOptions); err != nil {
		t.Fatal(err)
	}
	res, err := runClaim(ctx, t, c, gpuClaim("eighth-again", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if d := allocatedDevices(res)[0]; d != md.Parent.DeviceName() {
		t.Errorf("got %s, want the freed %s", d, md.Parent.DeviceName())
	}
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("hardware holds %v with only whole GPUs in use", got)
	}
}

// TestMigConfig: a MigConfig reaches the container; a GpuConfig on a MIG
// request fails the prepare with a message that says which kind to use.
func TestMigConfig(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	claim := migClaim("cfg", false, "2g.20gb")
	claim = withRequestConfig(claim, "mig0", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig","driverCapabilities":["compute","utility","video"]}`)
	res, err := runClaim(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Containers[0].EnvValue("NVIDIA_DRIVER_CAPABILITIES"); v != "compute,utility,video" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %q", v)
	}
	bad := withRequestConfig(migClaim("bad-cfg", false, "1g.10gb"), "mig0", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig"}`)
	_, err = runClaim(ctx, t, c, bad)
	if err == nil || !strings.Contains(err.Error(), "MigConfig") {
		t.Fatalf("GpuConfig on a MIG request: %v, want an error naming MigConfig", err)
	}
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, res.Claims[0].Claim); !reflect.DeepEqual(got, want) {
		t.Errorf("hardware holds %v, want only the good claim's %v", got, want)
	}
}

// TestAmpereMigModeOff: an A100 with MIG mode off (switching it needs a
// reset) is published whole only; a MIG claim cannot be placed. With MIG
// mode on (set by an admin), its placements are published instead of the
// whole GPU, and the plugin never turns that MIG mode off.
func TestAmpereMigModeOff(t *testing.T) {
	ctx, c := startCluster(t, "dgx-a100")
	if _, err := runClaim(ctx, t, c, migClaim("no-mig", false, "1g.5gb")); !errors.Is(err, ErrUnschedulable) {
		t.Fatalf("MIG claim on A100s with MIG off: %v, want unschedulable", err)
	}

	ctx, c = startCluster(t, profileFiles["dgx-a100-mig"])
	res, err := runClaim(ctx, t, c, migClaim("a100-mig", true, "3g.20gb", "1g.5gb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range allocatedDevices(res) {
		md, _ := c.Driver.Node().MigDeviceByName(d)
		if !md.Parent.MigEnabled {
			t.Errorf("%s is on a GPU with MIG mode off", d)
		}
	}
	if err := c.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	if got := instancesOn(hardware(t, c)); len(got) != 4 || !strings.HasSuffix(got[0], ":mig-on") {
		t.Errorf("after release the hardware is %v, want MIG mode still on (the admin's) on four GPUs and no instances", got)
	}
}

// withRequestConfig adds an opaque config for one request.
func withRequestConfig(claim *resourceapi.ResourceClaim, request, params string) *resourceapi.ResourceClaim {
	claim = withConfig(claim, params)
	claim.Spec.Devices.Config[len(claim.Spec.Devices.Config)-1].Requests = []string{request}
	return claim
}

// TestMigConcurrentPrepares: seven 1g.10gb claims that the allocator put on
// one GPU are prepared by seven concurrent calls (the kubelet prepares pods
// in parallel); operations on the GPU are serialized, so all succeed, and
// seven concurrent unprepares leave nothing, MIG mode included.
func TestMigConcurrentPrepares(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	var claims []*resourceapi.ResourceClaim
	for i := range 7 {
		claim, err := c.CreateClaim(ctx, migClaim(fmt.Sprintf("p%d", i), false, "1g.10gb"))
		if err != nil {
			t.Fatal(err)
		}
		if claim, err = c.Allocate(ctx, claim); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, claim)
	}
	parallel := func(call func(*resourceapi.ResourceClaim) error) {
		errs := make(chan error, len(claims))
		for _, claim := range claims {
			go func() { errs <- call(claim) }()
		}
		for range claims {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
	parallel(func(claim *resourceapi.ResourceClaim) error {
		resp, err := c.NodePrepareResources(ctx, claim)
		if err != nil {
			return err
		}
		if r := resp.Claims[string(claim.UID)]; r.Error != "" {
			return errors.New(r.Error)
		}
		return nil
	})
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, claims...); !reflect.DeepEqual(got, want) || len(want) != 8 {
		t.Fatalf("hardware holds %v, want %v (seven 1g on one GPU)", got, want)
	}
	parallel(func(claim *resourceapi.ResourceClaim) error {
		resp, err := c.NodeUnprepareResources(ctx, claim)
		if err != nil {
			return err
		}
		if r := resp.Claims[string(claim.UID)]; r.Error != "" {
			return errors.New(r.Error)
		}
		return nil
	})
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("after concurrent unprepares the hardware holds %v", got)
	}
}

// TestMigModeOffWhenUnpreparesOverlap: two claims' partitions on one GPU
// are unprepared so that the second claim's unprepare runs whole between
// the first one destroying its partition and forgetting the claim (the
// order that concurrent unprepares sometimes take: seen as "after
// concurrent unprepares the hardware holds [gpu-7:mig-on]" in a CI run of
// TestMigConcurrentPrepares). The GPU has no instance left, and MIG mode,
// which gpudra turned on, must be off again whichever unprepare ends last.
func TestMigModeOffWhenUnpreparesOverlap(t *testing.T) {
	var second *resourceapi.ResourceClaim // set before any unprepare
	var inner sync.Once
	var c *Cluster
	hooks := nodestate.Hooks{AfterMigDeviceDestroyed: func(claimUID, _ string) error {
		if second == nil || claimUID == string(second.UID) {
			return nil
		}
		inner.Do(func() {
			resp, err := c.NodeUnprepareResources(t.Context(), second)
			if err != nil {
				t.Error(err)
			} else if r := resp.Claims[string(second.UID)]; r.Error != "" {
				t.Error(r.Error)
			}
		})
		return nil
	}}
	ctx, c := startClusterWith(t, Options{Profile: "dgx-h100", Hooks: hooks})
	var claims []*resourceapi.ResourceClaim
	for i := range 2 {
		res, err := runClaim(ctx, t, c, migClaim(fmt.Sprintf("p%d", i), false, "1g.10gb"))
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, res.Claims[0].Claim)
	}
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, claims...); !reflect.DeepEqual(got, want) || len(want) != 3 {
		t.Fatalf("hardware holds %v, want %v (two 1g on one GPU)", got, want)
	}
	second = claims[1]
	resp, err := c.NodeUnprepareResources(ctx, claims[0])
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Claims[string(claims[0].UID)]; r.Error != "" {
		t.Fatal(r.Error)
	}
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("after both unprepares the hardware holds %v, want nothing (MIG mode off)", got)
	}
}

// TestMigProfileClasses: each per-profile DeviceClass carries the extended
// resource name NVIDIA's device plugin uses, and a claim for it (what the
// scheduler builds for a pod asking for nvidia.com/mig-<profile>, where the
// cluster maps extended resources to DRA) gets a partition of exactly that
// profile, for every profile of the node that has a class.
func TestMigProfileClasses(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	list, err := c.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Driver.Node()
	tested := 0
	for _, dc := range list.Items {
		profile, ok := strings.CutPrefix(dc.Name, "mig-")
		if !ok {
			continue
		}
		profile = strings.TrimSuffix(profile, ".gpudra.io")
		if dc.Spec.ExtendedResourceName == nil || *dc.Spec.ExtendedResourceName != "nvidia.com/mig-"+profile {
			t.Errorf("DeviceClass %s: extendedResourceName %v, want nvidia.com/mig-%s", dc.Name, dc.Spec.ExtendedResourceName, profile)
		}
		if _, ok := node.GPUs[0].MIG.ProfileByName(profile); !ok {
			continue // another model's profile
		}
		res, err := runClaim(ctx, t, c, migClaim("ext-"+strings.ReplaceAll(profile, ".", "-"), false, profile))
		if err != nil {
			t.Fatalf("%s: %v", dc.Name, err)
		}
		md, _ := node.MigDeviceByName(allocatedDevices(res)[0])
		if md.Profile.Name != profile {
			t.Errorf("%s gave %s", dc.Name, md.Name())
		}
		if err := c.StopPod(ctx, res); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.ResourceV1().ResourceClaims("default").Delete(ctx, res.Claims[0].Claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		tested++
	}
	if tested != 6 {
		t.Errorf("tested %d H100 profiles, want 6 (all but +me)", tested)
	}
}
