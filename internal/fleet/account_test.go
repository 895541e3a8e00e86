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

package fleet

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	a100 = "NVIDIA A100-SXM4-40GB"
)

func TestAccount(t *testing.T) {
	in := Inputs{
		DriverName: driver,
		Now:        now,
		Slices: []*resourceapi.ResourceSlice{
			slice("node-a", 2, gpuDev(0, h100, "GPU-a0"), gpuDev(1, h100, "GPU-a1"), gpuDev(2, h100, "GPU-a2")),
			slice("node-a", 2,
				migDev("gpu-0-mig-1g10gb-0", h100, "1g.10gb", "GPU-a0"), migDev("gpu-0-mig-1g10gb-1", h100, "1g.10gb", "GPU-a0"),
				migDev("gpu-0-mig-3g40gb-4", h100, "3g.40gb", "GPU-a0"), migDev("gpu-1-mig-1g10gb-0", h100, "1g.10gb", "GPU-a1")),
			// An older generation on its way out: not counted.
			slice("node-a", 1, gpuDev(7, h100, "GPU-old")),
			slice("node-b", 1, tainted(gpuDev(0, a100, "GPU-b0")), gpuDev(1, a100, "GPU-b1")),
			// Another driver's slice.
			func() *resourceapi.ResourceSlice {
				s := slice("node-b", 1, gpuDev(5, "other", "x"))
				s.Spec.Driver = "gpu.nvidia.com"
				return s
			}(),
		},
		Classes: []*resourceapi.DeviceClass{class("gpu.gpudra.io", driver), class("gpu.nvidia.com", "gpu.nvidia.com")},
		Claims: []*resourceapi.ResourceClaim{
			allocated(claim("ns", "whole", "gpu.gpudra.io", time.Hour), false, DeviceID{"node-a", "gpu-2"}),
			allocated(claim("ns", "two-mig", "mig.gpudra.io", time.Hour), false,
				DeviceID{"node-a", "gpu-0-mig-1g10gb-0"}, DeviceID{"node-a", "gpu-0-mig-3g40gb-4"}),
			// Admin access (a monitoring pod) takes nothing.
			allocated(claim("monitoring", "all", "gpu.gpudra.io", time.Hour), true,
				DeviceID{"node-b", "gpu-0"}, DeviceID{"node-b", "gpu-1"}),
			claim("ns", "waits-10m", "gpu.gpudra.io", 10*time.Minute),
			claim("ns", "waits-2m", "gpu.gpudra.io", 2*time.Minute),
			claim("ns", "nobody-uses-it", "gpu.gpudra.io", 5*time.Hour),
			claim("ns", "other-driver", "gpu.nvidia.com", 5*time.Hour),
			claim("ns", "pod-finished", "gpu.gpudra.io", 5*time.Hour),
			func() *resourceapi.ResourceClaim {
				c := claim("ns", "first-available", "none", 20*time.Minute)
				c.Spec.Devices.Requests[0].Exactly = nil
				c.Spec.Devices.Requests[0].FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: "gpu.gpudra.io"}}
				return c
			}(),
		},
		Pods: []*corev1.Pod{
			pod("ns", "p1", corev1.PodRunning, "whole", "two-mig"),
			pod("ns", "p2", corev1.PodPending, "waits-10m"),
			pod("ns", "p3", corev1.PodPending, "waits-2m", "other-driver"),
			pod("ns", "p4", corev1.PodSucceeded, "pod-finished"),
			func() *corev1.Pod {
				// A claim from a template: the pod names it in its status.
				p := pod("ns", "p5", corev1.PodPending)
				p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}
				p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("first-available")}}
				return p
			}(),
		},
	}
	snap := Account(in)

	wantDevices := map[DeviceKey]DeviceCounts{
		{"node-a", h100, "gpu", ""}:        {Published: 3, Allocated: 1, AllocatedBySharing: unshared(1)},
		{"node-a", h100, "mig", "1g.10gb"}: {Published: 3, Allocated: 1, AllocatedBySharing: unshared(1)},
		{"node-a", h100, "mig", "3g.40gb"}: {Published: 1, Allocated: 1, AllocatedBySharing: unshared(1)},
		{"node-b", a100, "gpu", ""}:        {Published: 2, Tainted: 1},
	}
	if !reflect.DeepEqual(snap.Devices, wantDevices) {
		t.Errorf("devices:\n got %v\nwant %v", snap.Devices, wantDevices)
	}
	wantGPUs := map[GPUKey]GPUCounts{
		{"node-a", h100}: {Free: 1, Whole: 1, Partitioned: 1},
		{"node-b", a100}: {Free: 2},
	}
	if !reflect.DeepEqual(snap.GPUs, wantGPUs) {
		t.Errorf("GPUs:\n got %v\nwant %v", snap.GPUs, wantGPUs)
	}
	if snap.AllocatedClaims != 3 {
		t.Errorf("allocated claims = %d, want 3", snap.AllocatedClaims)
	}
	want := []PendingClaim{{"ns", "first-available", 20 * time.Minute}, {"ns", "waits-10m", 10 * time.Minute}, {"ns", "waits-2m", 2 * time.Minute}}
	if !reflect.DeepEqual(snap.Pending, want) {
		t.Errorf("pending:\n got %v\nwant %v", snap.Pending, want)
	}
	if snap.OldestPendingAge() != 20*time.Minute {
		t.Errorf("oldest pending age = %v", snap.OldestPendingAge())
	}
}

func unshared(n int) map[string]int { return map[string]int{SharingNone: n} }

func TestAccountEmpty(t *testing.T) {
	snap := Account(Inputs{DriverName: driver, Now: now})
	if len(snap.Devices) != 0 || len(snap.GPUs) != 0 || snap.AllocatedClaims != 0 || snap.OldestPendingAge() != 0 {
		t.Errorf("empty cluster: %+v", snap)
	}
}
