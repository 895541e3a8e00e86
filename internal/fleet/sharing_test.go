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
	"cmp"
	"reflect"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Opaque parameters of this driver, as users write them.
const (
	gpuMPS       = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`
	gpuTimeSlice = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`
	gpuCapsOnly  = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","utility","video"]}`
	migMPS       = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig","sharing":{"strategy":"MPS"}}`
	unknownField = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","bogus":1}}`
)

const gpuMemory = 80 << 30

// shareable is a whole GPU published for consumable capacity.
func shareable(d resourceapi.Device) resourceapi.Device {
	d.AllowMultipleAllocations = ptr.To(true)
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		"memory": {Value: *resource.NewQuantity(gpuMemory, resource.BinarySI)},
	}
	return d
}

// withConfig adds an opaque config of driver drv to the claim's
// allocation, from the claim or (class) its DeviceClass.
func withConfig(c *resourceapi.ResourceClaim, class bool, drv, params string) *resourceapi.ResourceClaim {
	source := resourceapi.AllocationConfigSourceClaim
	if class {
		source = resourceapi.AllocationConfigSourceClass
	}
	c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source: source,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: drv, Parameters: runtime.RawExtension{Raw: []byte(params)}}},
	})
	return c
}

// share makes every result of the claim a share of its device that
// consumes the given memory.
func share(c *resourceapi.ResourceClaim, memory int64) *resourceapi.ResourceClaim {
	for i := range c.Status.Allocation.Devices.Results {
		r := &c.Status.Allocation.Devices.Results[i]
		r.ShareID = ptr.To(types.UID("share-" + c.Name))
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": *resource.NewQuantity(memory, resource.BinarySI)}
	}
	return c
}

// TestAccountSharing: published devices are exclusive or shareable;
// allocated devices count under the strategy their merged configs ask
// for (MPS, TimeSlicing), "share" for a share smaller than the GPU
// without one (the node pool's default applies), "none" otherwise, and
// "invalid" for configs the plugin would refuse. A shareable GPU held by
// several claims counts once, under the strongest value among them.
func TestAccountSharing(t *testing.T) {
	a := func(name string, devs ...string) *resourceapi.ResourceClaim {
		c := claim("ns", name, "gpu.gpudra.io", time.Hour)
		var ids []DeviceID
		for _, d := range devs {
			pool := "node-x"
			if d[0] == 's' {
				pool, d = "node-s", d[1:]
			}
			ids = append(ids, DeviceID{pool, d})
		}
		return allocated(c, false, ids...)
	}
	in := Inputs{
		DriverName: driver,
		Now:        now,
		Slices: []*resourceapi.ResourceSlice{
			// Exclusive GPUs and MIG placements.
			slice("node-x", 1, gpuDev(0, h100, "GPU-x0"), gpuDev(1, h100, "GPU-x1"), gpuDev(2, h100, "GPU-x2"),
				gpuDev(3, h100, "GPU-x3"), gpuDev(4, h100, "GPU-x4"), gpuDev(5, h100, "GPU-x5"), gpuDev(6, h100, "GPU-x6"),
				migDev("gpu-7-mig-1g10gb-0", h100, "1g.10gb", "GPU-x7"), migDev("gpu-7-mig-1g10gb-1", h100, "1g.10gb", "GPU-x7")),
			// A node pool with consumable capacity.
			slice("node-s", 1, shareable(gpuDev(0, h100, "GPU-s0")), shareable(gpuDev(1, h100, "GPU-s1")),
				shareable(gpuDev(2, h100, "GPU-s2")), shareable(gpuDev(3, h100, "GPU-s3")), shareable(gpuDev(4, h100, "GPU-s4")),
				shareable(gpuDev(5, h100, "GPU-s5"))),
		},
		Claims: []*resourceapi.ResourceClaim{
			// Exclusive GPUs.
			withConfig(a("mps", "gpu-0"), false, driver, gpuMPS),
			withConfig(a("time-sliced-by-class", "gpu-1"), true, driver, gpuTimeSlice),
			a("plain", "gpu-2"),
			// The claim's sharing replaces the class's; a claim config
			// without sharing keeps the class's.
			withConfig(withConfig(a("claim-over-class", "gpu-3"), false, driver, gpuMPS), true, driver, gpuTimeSlice),
			withConfig(withConfig(a("caps-over-class", "gpu-4"), false, driver, gpuCapsOnly), true, driver, gpuMPS),
			// Another driver's config is not ours to read.
			withConfig(a("other-driver-config", "gpu-5"), false, "gpu.nvidia.com", `not even JSON`),
			// A config the plugin refuses: an unknown field, and a
			// GpuConfig for a MIG partition.
			withConfig(a("unknown-field", "gpu-6"), false, driver, unknownField),
			withConfig(a("gpuconfig-on-mig", "gpu-7-mig-1g10gb-0"), false, driver, gpuMPS),
			withConfig(a("mig-mps", "gpu-7-mig-1g10gb-1"), false, driver, migMPS),
			// Shares: two MPS shares of s0; a time-sliced share and a
			// share without config of s1; a share without config of s2;
			// all the memory of s3 without config (the whole GPU, alone).
			withConfig(share(a("mps-share-1", "sgpu-0"), 20<<30), false, driver, gpuMPS),
			withConfig(share(a("mps-share-2", "sgpu-0"), 30<<30), false, driver, gpuMPS),
			withConfig(share(a("ts-share", "sgpu-1"), 10<<30), false, driver, gpuTimeSlice),
			share(a("share-s1", "sgpu-1"), 10<<30),
			share(a("share-s2", "sgpu-2"), 10<<30),
			share(a("all-of-s3", "sgpu-3"), gpuMemory),
			// Admin access takes nothing, whatever its config.
			withConfig(func() *resourceapi.ResourceClaim {
				c := allocated(claim("monitoring", "all", "gpu.gpudra.io", time.Hour), true, DeviceID{"node-s", "gpu-4"})
				return share(c, 1<<30)
			}(), false, driver, gpuMPS),
		},
	}
	snap := Account(in)
	want := map[DeviceKey]DeviceCounts{
		{"node-x", h100, "gpu", ""}: {Published: 7, Allocated: 7,
			AllocatedBySharing: map[string]int{SharingMPS: 3, SharingTimeSlicing: 1, SharingNone: 2, SharingInvalid: 1}},
		{"node-x", h100, "mig", "1g.10gb"}: {Published: 2, Allocated: 2,
			AllocatedBySharing: map[string]int{SharingMPS: 1, SharingInvalid: 1}},
		{"node-s", h100, "gpu", ""}: {Published: 6, Shareable: 6, Allocated: 4,
			AllocatedBySharing: map[string]int{SharingMPS: 1, SharingTimeSlicing: 1, SharingShare: 1, SharingNone: 1}},
	}
	if !reflect.DeepEqual(snap.Devices, want) {
		t.Errorf("devices:\n got %v\nwant %v", snap.Devices, want)
	}
	wantGPUs := map[GPUKey]GPUCounts{
		{"node-x", h100}: {Whole: 7},
		{"node-s", h100}: {Whole: 4, Free: 2},
	}
	if !reflect.DeepEqual(snap.GPUs, wantGPUs) {
		t.Errorf("GPUs:\n got %v\nwant %v", snap.GPUs, wantGPUs)
	}
}

// TestAllocationSharingPerDevice names the value each device gets, so a
// failure says which rule broke.
func TestAllocationSharingPerDevice(t *testing.T) {
	gpu := func(name string) *resourceapi.ResourceClaim {
		return allocated(claim("ns", name, "gpu.gpudra.io", time.Hour), false, DeviceID{"node-s", "gpu-0"})
	}
	tests := []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   string
	}{
		{"exclusive use of a shareable GPU", []*resourceapi.ResourceClaim{gpu("c")}, SharingNone},
		{"share without config", []*resourceapi.ResourceClaim{share(gpu("c"), 1<<30)}, SharingShare},
		{"share of all the memory", []*resourceapi.ResourceClaim{share(gpu("c"), gpuMemory)}, SharingNone},
		{"MPS share", []*resourceapi.ResourceClaim{withConfig(share(gpu("c"), 1<<30), false, driver, gpuMPS)}, SharingMPS},
		{"MPS over a plain share", []*resourceapi.ResourceClaim{share(gpu("a"), 1<<30), withConfig(share(gpu("b"), 1<<30), false, driver, gpuMPS)}, SharingMPS},
		{"time-slicing over a plain share", []*resourceapi.ResourceClaim{withConfig(share(gpu("a"), 1<<30), false, driver, gpuTimeSlice), share(gpu("b"), 1<<30)}, SharingTimeSlicing},
		{"MPS over time-slicing", []*resourceapi.ResourceClaim{withConfig(share(gpu("a"), 1<<30), false, driver, gpuTimeSlice), withConfig(share(gpu("b"), 1<<30), false, driver, gpuMPS)}, SharingMPS},
		{"share over invalid", []*resourceapi.ResourceClaim{withConfig(share(gpu("a"), 1<<30), false, driver, unknownField), share(gpu("b"), 1<<30)}, SharingShare},
		{"none over invalid", []*resourceapi.ResourceClaim{withConfig(gpu("a"), false, driver, unknownField), gpu("b")}, SharingNone},
		{"invalid share", []*resourceapi.ResourceClaim{withConfig(share(gpu("a"), 1<<30), false, driver, migMPS)}, SharingInvalid},
		{"config for another request", []*resourceapi.ResourceClaim{func() *resourceapi.ResourceClaim {
			c := withConfig(share(gpu("a"), 1<<30), false, driver, gpuMPS)
			c.Status.Allocation.Devices.Config[0].Requests = []string{"other"}
			return c
		}()}, SharingShare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := slice("node-s", 1, shareable(gpuDev(0, h100, "GPU-s0")))
			inv := newInventory(&sliceCache{driver: driver}, []*CompactSlice{(&Compactor{}).Compact(s)}, nil, nil)
			got := cmp.Or(allocationSharing(driver, tt.claims, inv)[DeviceID{"node-s", "gpu-0"}], SharingNone)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
