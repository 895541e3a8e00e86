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
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Sharing benchmarks (figures in docs/sharing.md):
//
//	go test ./internal/simulate -run '^$' -bench 'BenchmarkMPSPrepare|BenchmarkMPSDaemons|BenchmarkAllocateShare' -benchmem

// BenchmarkMPSPrepare: NodePrepareResources of an MPS claim over the
// socket, when its GPU's daemon must start (cold: a real stand-in process,
// launched and waited for on its control socket) and when it runs already
// for another claim (warm).
func BenchmarkMPSPrepare(b *testing.B) {
	for _, warm := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "warm"}[warm]
		b.Run(name, func(b *testing.B) {
			ctx, c := startSharedCluster(b, "dgx-h100", "None")
			onGPU0 := selectors("device.attributes['gpu.gpudra.io'].minor == 0")
			share := func(n string) *resourceapi.ResourceClaim {
				claim := shareClaim(n, "8Gi", "", mpsSharing)
				claim.Spec.Devices.Requests[0].Exactly.Selectors = onGPU0
				claim, err := c.CreateClaim(ctx, claim)
				if err != nil {
					b.Fatal(err)
				}
				claim, err = c.Allocate(ctx, claim)
				if err != nil {
					b.Fatal(err)
				}
				return claim
			}
			if warm {
				holder := share("holder")
				if resp, err := c.NodePrepareResources(ctx, holder); err != nil || resp.Claims[string(holder.UID)].Error != "" {
					b.Fatalf("prepare: %v %v", err, resp)
				}
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				claim := share(fmt.Sprintf("bench-%d", i))
				b.StartTimer()
				start := time.Now()
				resp, err := c.NodePrepareResources(ctx, claim)
				lat = append(lat, time.Since(start))
				b.StopTimer()
				if err != nil || resp.Claims[string(claim.UID)].Error != "" {
					b.Fatalf("prepare: %v %v", err, resp)
				}
				releaseClaim(b, c, claim)
				if n := len(daemons(b, c)); n != map[bool]int{false: 0, true: 1}[warm] {
					b.Fatalf("%d daemons after releasing the claim", n)
				}
				b.StartTimer()
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkMPSDaemons prepares N MPS claims that share one GPU (10 shares
// of 8000Mi nearly fill an H100's 81559 MiB) and reports how many daemons
// run: one.
func BenchmarkMPSDaemons(b *testing.B) {
	const n = 10
	for b.Loop() {
		b.StopTimer()
		ctx, c := startSharedCluster(b, "dgx-h100", "MPS")
		b.StartTimer()
		for i := range n {
			claim := shareClaim(fmt.Sprintf("share-%d", i), "8000Mi", "", "")
			claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors("device.attributes['gpu.gpudra.io'].minor == 0")
			if _, err := createAndRun(ctx, b, c, claim); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		got := daemons(b, c)
		if len(got) != 1 {
			b.Fatalf("%d claims on one GPU run daemons %v, want one", n, got)
		}
		b.ReportMetric(float64(len(got)), "daemons")
		b.ReportMetric(n, "claims")
		b.StartTimer()
	}
}

// BenchmarkAllocateShareBusyNode: the scheduler's cost (one Filter call,
// the incubating allocator) of a 20Gi consumable-capacity claim on a busy
// node whose GPUs are shareable, against a whole-GPU claim on the same
// layout and on exclusive GPUs. Busy: 7 of 8 GPUs hold a 40Gi share (the
// shareable layouts) or are allocated whole (exclusive).
func BenchmarkAllocateShareBusyNode(b *testing.B) {
	for _, tc := range []struct {
		name   string
		shared bool
		claim  *resourceapi.ResourceClaim
	}{
		{"exclusive/whole-gpu", false, gpu1Claim()},
		{"shareable/whole-gpu", true, gpu1Claim()},
		{"shareable/share-20gi", true, shareBench("20Gi")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			run := newShareCluster(b, tc.shared).allocator(b, "incubating", tc.claim)
			run()
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
		})
	}
}

func shareBench(memory string) *resourceapi.ResourceClaim {
	claim := gpu1Claim()
	claim.Spec.Devices.Requests[0].Exactly.Capacity = shareClaim("x", memory, "", "").Spec.Devices.Requests[0].Exactly.Capacity
	return claim
}

// newShareCluster is one busy DGX H100 with MIG placements, its GPUs
// shareable or not.
func newShareCluster(tb testing.TB, shared bool) *allocCluster {
	tb.Helper()
	c := newAllocCluster(tb, shapeMIG, 1, 0)
	if !shared {
		for g := range 7 {
			c.state.AllocatedDevices.Insert(structured.MakeDeviceID("gpu.gpudra.io", "node-0", fmt.Sprintf("gpu-%d", g)))
		}
		return c
	}
	res, err := slicebuilder.Build(h100Inventory(tb), slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent", ConsumableCapacity: true})
	if err != nil {
		tb.Fatal(err)
	}
	whole := res.Pools["node-0"].Slices[0].Devices
	c.slices[0].Spec.Devices = whole
	for g := range 7 {
		id := structured.MakeDeviceID("gpu.gpudra.io", "node-0", fmt.Sprintf("gpu-%d", g))
		shareID := types.UID(fmt.Sprintf("share-%d", g))
		c.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &shareID))
		c.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, map[resourceapi.QualifiedName]resourceQuantity{
			"memory": mustQuantity("40Gi"), "multiprocessors": mustQuantity("0"),
		}))
	}
	return c
}

// TestShareAllocatorCost guards the scheduler cost of consumable capacity:
// a share claim on a busy node of shareable GPUs costs at most 3× the
// allocations of a whole-GPU claim on exclusive GPUs.
func TestShareAllocatorCost(t *testing.T) {
	exclusive := testing.AllocsPerRun(20, newShareCluster(t, false).allocator(t, "incubating", gpu1Claim()))
	share := testing.AllocsPerRun(20, newShareCluster(t, true).allocator(t, "incubating", shareBench("20Gi")))
	t.Logf("allocs per Filter call, busy node: whole GPU on exclusive GPUs %.0f, 20Gi share on shareable GPUs %.0f (%.2f×)", exclusive, share, share/exclusive)
	if share > 3*exclusive {
		t.Errorf("a share costs %.0f allocs per Filter call, %.2f× a whole GPU's %.0f; the limit is 3×", share, share/exclusive, exclusive)
	}
}
