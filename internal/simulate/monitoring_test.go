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
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// monitoringClaim asks for every device of a class with admin access, as a
// DCGM-exporter-like pod does, tolerating the monitoring devices' taint.
func monitoringClaim(name, class string, admin bool) *resourceapi.ResourceClaim {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class,
		AllocationMode:  resourceapi.DeviceAllocationModeAll,
		Tolerations: []resourceapi.DeviceToleration{{
			Key: slicebuilder.MonitoringTaintKey("gpu.gpudra.io"), Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule,
		}},
	}}
	if admin {
		req.Exactly.AdminAccess = ptr.To(true)
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}},
	}
}

// TestMonitoringWithAdminAccess: a monitoring pod asks for every GPU of its
// node with admin access while workloads use some, whole and as MIG
// partitions. Through the whole-GPU class the allocator refuses it on a
// node with partitionable GPUs (it checks counters for admin access too,
// and a used GPU's are consumed); through gpu-monitoring.gpudra.io it gets
// all eight GPUs, and its container sees them. A monitoring device asked
// for without admin access is refused at prepare.
func TestMonitoringWithAdminAccess(t *testing.T) {
	for _, profile := range []string{"dgx-h100", "dgx-a100", "mixed"} {
		t.Run(profile, func(t *testing.T) {
			ctx, c := startCluster(t, profile)
			gpus := c.Driver.Node().GPUs
			// Workloads: one whole GPU, and, where a GPU can be
			// partitioned, a 1g partition.
			if _, err := createAndRun(ctx, t, c, gpuClaim("whole", 1, "")); err != nil {
				t.Fatal(err)
			}
			partitionable := false
			if _, err := runClaim(ctx, t, c, migClaim("part", false, "1g.10gb")); err == nil {
				partitionable = true
			} else if !errors.Is(err, ErrUnschedulable) {
				t.Fatal(err)
			}

			// Upstream: admin access through the whole-GPU class.
			_, err := createAndRun(ctx, t, c, monitoringClaim("through-gpu-class", "gpu.gpudra.io", true))
			switch {
			case partitionable && !errors.Is(err, ErrUnschedulable):
				t.Errorf("admin access to every whole GPU of a partitionable node in use: %v; the allocator is expected to refuse it (counters)", err)
			case !partitionable && err != nil:
				t.Errorf("admin access to every whole GPU of a node without partitionable GPUs: %v", err)
			}

			// gpudra's answer: the monitoring class.
			res, err := createAndRun(ctx, t, c, monitoringClaim("monitor", "gpu-monitoring.gpudra.io", true))
			if err != nil {
				t.Fatalf("monitoring through gpu-monitoring.gpudra.io: %v", err)
			}
			devs := allocatedDevices(res)
			if len(devs) != len(gpus) {
				t.Fatalf("the monitoring claim got %v, want one device per GPU (%d)", devs, len(gpus))
			}
			for _, r := range res.Claims[0].Claim.Status.Allocation.Devices.Results {
				if r.AdminAccess == nil || !*r.AdminAccess || !strings.HasSuffix(r.Device, "-monitor") {
					t.Errorf("result %+v: want a monitoring device with admin access", r)
				}
			}
			seen := res.Containers[0]
			for _, g := range gpus {
				if v, ok := seen.EnvValue("GPUDRA_FAKE_GPU_" + strconv.Itoa(g.Minor)); !ok || v != g.UUID {
					t.Errorf("the monitoring container does not see GPU %d (%s)", g.Minor, g.UUID)
				}
			}

			// A claim of a class that selects every device of the
			// driver never gets a monitoring device: their taint keeps
			// it off them, however busy the node.
			broad := gpuClaim("broad", int64(len(gpus)+1), "")
			broad.Spec.Devices.Requests[0].Exactly.DeviceClassName = "every-device"
			if err := c.ApplyDeviceClass(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "every-device"},
				Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: "device.driver == 'gpu.gpudra.io' && device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('1Gi')) >= 0"}}}}}); err != nil {
				t.Fatal(err)
			}
			if res, err := createAndRun(ctx, t, c, broad); err == nil {
				for _, d := range allocatedDevices(res) {
					if strings.HasSuffix(d, "-monitor") {
						t.Errorf("a claim of a broad class got the monitoring device %s", d)
					}
				}
			} else if !errors.Is(err, ErrUnschedulable) {
				t.Errorf("a broad class with a memory selector: %v (a monitoring device must not fail its evaluation)", err)
			}

			// Without admin access, a monitoring device is refused, even
			// to a request that tolerates the taint.
			one := monitoringClaim("sneaky", "gpu-monitoring.gpudra.io", false)
			one.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			one.Spec.Devices.Requests[0].Exactly.Count = 1
			_, err = createAndRun(ctx, t, c, one)
			if err == nil || !strings.Contains(err.Error(), "is for monitoring only") {
				t.Errorf("a monitoring device without admin access: %v", err)
			}
		})
	}
}

// BenchmarkMonitorDevicesCost is what the monitoring devices cost the
// scheduler: one Filter call on a busy DGX H100 node (7 of 8 GPUs taken),
// with and without them, in the plain and the MIG layout; and the
// monitoring claim itself (all eight, admin access).
//
//	go test ./internal/simulate -run '^$' -bench BenchmarkMonitorDevicesCost -benchmem
func BenchmarkMonitorDevicesCost(b *testing.B) {
	claims := map[string]*resourceapi.ResourceClaim{
		"gpu1":      gpu1Claim(),
		"mig1g10gb": benchClaim("mig-1g.10gb.gpudra.io"),
		"monitor":   monitoringClaim("bench", "gpu-monitoring.gpudra.io", true),
	}
	claims["monitor"].UID = "bench-monitor"
	for _, shape := range []allocShape{shapePlain, shapeMIG} {
		for _, monitors := range []bool{false, true} {
			inv := h100Inventory(b)
			res, err := slicebuilder.Build(inv, slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent", WholeGPUsOnly: shape == shapePlain})
			if err != nil {
				b.Fatal(err)
			}
			pool := res.Pools["node-0"].Slices
			if !monitors {
				pool = pool[:len(pool)-1] // the monitoring devices' slice is last
			}
			c := newAllocClusterFrom(b, pool, 100, 7)
			for _, name := range []string{"gpu1", "mig1g10gb", "monitor"} {
				if shape == shapePlain && name == "mig1g10gb" || !monitors && name == "monitor" {
					continue
				}
				b.Run(fmt.Sprintf("%s/monitors=%v/%s", shape, monitors, name), func(b *testing.B) {
					run := c.allocator(b, "incubating", claims[name])
					run()
					b.ReportAllocs()
					for b.Loop() {
						run()
					}
				})
			}
		}
	}
}
