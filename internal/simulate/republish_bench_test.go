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
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// What a republish costs, and how soon what it publishes can be allocated.
//
//	go test ./internal/simulate -run '^$' -bench 'Benchmark(Freed|Refill|Republish)' -benchmem -benchtime=20x

// allocatableNow says whether the scheduler could allocate the claim on
// the node from what the API server holds this moment (not waiting for the
// plugin to say it published): the slices as listed, the devices of every
// allocated claim held.
func allocatableNow(ctx context.Context, c *Cluster, claim *resourceapi.ResourceClaim) (bool, error) {
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	var slices []*resourceapi.ResourceSlice
	for i := range list.Items {
		slices = append(slices, &list.Items[i])
	}
	classList, err := c.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	var classes []*resourceapi.DeviceClass
	for i := range classList.Items {
		classes = append(classes, &classList.Items[i])
	}
	claimList, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	var claims []*resourceapi.ResourceClaim
	for i := range claimList.Items {
		claims = append(claims, &claimList.Items[i])
	}
	sched := scheduler.New(c.features, scheduler.NewClasses(classes), slices, nil)
	_, err = sched.Schedule(ctx, scheduler.StateOf(claims), []*resourceapi.ResourceClaim{claim}, nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, scheduler.ErrUnschedulable):
		return false, nil
	}
	return false, err
}

// waitFree waits until the API server holds the device in the newest
// complete generation of the node's pool and no allocated claim holds it,
// which is when the scheduler can allocate it again (a cheap poll: the
// allocator itself is run once at the end, to be sure), and returns how
// long that took.
func waitFree(ctx context.Context, b *testing.B, c *Cluster, device string, claim *resourceapi.ResourceClaim) time.Duration {
	b.Helper()
	start := time.Now()
	for !deviceFree(ctx, b, c, device) {
		if time.Since(start) > 30*time.Second {
			b.Fatalf("%s is not free 30s after the unprepare", device)
		}
		time.Sleep(500 * time.Microsecond)
	}
	d := time.Since(start)
	if ok, err := allocatableNow(ctx, c, claim); err != nil || !ok {
		b.Fatalf("%s is published and free, but claim %s does not fit: %v", device, claim.Name, err)
	}
	return d
}

// deviceFree: see waitFree.
func deviceFree(ctx context.Context, b testing.TB, c *Cluster, device string) bool {
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var newest int64
	n := 0
	for _, s := range list.Items {
		switch g := s.Spec.Pool.Generation; {
		case g > newest:
			newest, n = g, 1
		case g == newest:
			n++
		}
	}
	published := false
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != newest {
			continue
		}
		if int64(n) != s.Spec.Pool.ResourceSliceCount {
			return false
		}
		for _, d := range s.Spec.Devices {
			published = published || d.Name == device
		}
	}
	if !published {
		return false
	}
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, cl := range claims.Items {
		if a := cl.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if r.Device == device {
					return false
				}
			}
		}
	}
	return true
}

// freedCase is a device that a claim frees, and a claim that needs exactly
// it afterwards (everything else the node has is held).
type freedCase struct {
	name string
	// fill holds the rest of the node; take is the claim that frees the
	// device; next needs the device.
	fill, take, next func(i int) *resourceapi.ResourceClaim
	// device is what next needs.
	device string
}

var freedCases = []freedCase{
	{
		// The old layout hid a partitioned GPU's whole device; now it
		// stays published.
		name:   "whole-GPU-after-its-partition",
		fill:   func(int) *resourceapi.ResourceClaim { return gpuClaim("fill", 7, "") },
		take:   func(i int) *resourceapi.ResourceClaim { return migClaim(fmt.Sprintf("take-%d", i), false, "1g.10gb") },
		next:   func(i int) *resourceapi.ResourceClaim { return gpuClaim(fmt.Sprintf("next-%d", i), 1, "") },
		device: "gpu-7",
	},
	{
		// The spare taken whole hides its placements; freed, it is the
		// spare again (one slice write) before a partition fits.
		name:   "partition-after-the-spare-taken-whole",
		fill:   func(int) *resourceapi.ResourceClaim { return gpuClaim("fill", 7, "") },
		take:   func(i int) *resourceapi.ResourceClaim { return gpuClaim(fmt.Sprintf("take-%d", i), 1, "") },
		next:   func(i int) *resourceapi.ResourceClaim { return migClaim(fmt.Sprintf("next-%d", i), false, "1g.10gb") },
		device: "gpu-7-mig-1g10gb-0",
	},
	{
		name:   "whole-GPU-after-it-was-held",
		fill:   func(int) *resourceapi.ResourceClaim { return gpuClaim("fill", 7, "") },
		take:   func(i int) *resourceapi.ResourceClaim { return gpuClaim(fmt.Sprintf("take-%d", i), 1, "") },
		next:   func(i int) *resourceapi.ResourceClaim { return gpuClaim(fmt.Sprintf("next-%d", i), 1, "") },
		device: "gpu-7",
	},
}

// BenchmarkFreedDeviceAllocatable is the time from an unprepare (and the
// claim's deallocation) to the moment the scheduler can allocate the freed
// device again from what the API server holds, on a DGX H100 whose other
// GPUs are held: p50 and p99 over the iterations.
func BenchmarkFreedDeviceAllocatable(b *testing.B) {
	for _, fc := range freedCases {
		b.Run(fc.name, func(b *testing.B) {
			_, ctx := ktesting.NewTestContext(b)
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(b)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Stop)
			applyClasses(ctx, b, c)
			fill := allocatedClaim(b, c, fc.fill(0))
			if _, err := c.NodePrepareResources(ctx, fill); err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				take := allocatedClaim(b, c, fc.take(i))
				if resp, err := c.NodePrepareResources(ctx, take); err != nil || resp.Claims[string(take.UID)].Error != "" {
					b.Fatalf("prepare: %v %v", err, resp)
				}
				if _, err := c.Slices(ctx); err != nil { // what the prepare republished
					b.Fatal(err)
				}
				next, err := c.CreateClaim(ctx, fc.next(i))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				releaseClaim(b, c, take)
				lat = append(lat, waitFree(ctx, b, c, fc.device, next))
				b.StopTimer()
				if err := c.Client.ResourceV1().ResourceClaims(next.Namespace).Delete(ctx, next.Name, metav1.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkRefill is how soon a node offers the next GPU's placements once
// a claim takes the last spare: from the prepare's answer to the moment a
// partition of the next GPU can be allocated from what the API server
// holds. Each step fills the spare with a 7g.80gb partition; after seven
// the node is started afresh.
func BenchmarkRefill(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	var c *Cluster
	used := 0
	restart := func() {
		if c != nil {
			c.Stop()
		}
		var err error
		if c, err = Start(ctx, Options{Dir: gpudratest.ShortTempDir(b)}, nil); err != nil {
			b.Fatal(err)
		}
		applyClasses(ctx, b, c)
		used = 0
	}
	b.Cleanup(func() {
		if c != nil {
			c.Stop()
		}
	})
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if c == nil || used == 7 {
			restart()
		}
		full := allocatedClaim(b, c, migClaim(fmt.Sprintf("full-%d", i), false, "7g.80gb"))
		probe, err := c.CreateClaim(ctx, migClaim(fmt.Sprintf("probe-%d", i), false, "1g.10gb"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if resp, err := c.NodePrepareResources(ctx, full); err != nil || resp.Claims[string(full.UID)].Error != "" {
			b.Fatalf("prepare: %v %v", err, resp)
		}
		// GPUs fill from the highest minor: the next spare is the one below.
		lat = append(lat, waitFree(ctx, b, c, fmt.Sprintf("gpu-%d-mig-1g10gb-0", 6-used), probe))
		b.StopTimer()
		used++
		if err := c.Client.ResourceV1().ResourceClaims(probe.Namespace).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
}

// BenchmarkRepublishCost is what one republish costs the plugin's process
// (building the slices and the ResourceSlice controller's comparison and
// write, each step of it): a cycle takes the spare GPU whole (its
// placements hidden, the next GPU made the spare: two single-slice
// writes) and frees it, with one spare and with every GPU's placements
// published (--mig-spare-gpus=all). Allocations are the process's, all
// goroutines; writes are ResourceSlice writes per cycle.
func BenchmarkRepublishCost(b *testing.B) {
	for _, spare := range []string{"1", "all"} {
		b.Run("spares="+spare, func(b *testing.B) {
			_, ctx := ktesting.NewTestContext(b)
			sp, err := slicebuilder.ParseSpareGPUs(spare)
			if err != nil {
				b.Fatal(err)
			}
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(b), SpareGPUs: sp}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Stop)
			applyClasses(ctx, b, c)
			if _, err := c.Slices(ctx); err != nil {
				b.Fatal(err)
			}
			time.Sleep(time.Second) // the controller's initial sync
			var mallocs, writes int64
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				// The spare moves between GPUs 7 and 6: take the one
				// that is the spare now.
				claim := allocatedClaim(b, c, gpuClaim(fmt.Sprintf("spare-%d", i), 1, "", fmt.Sprintf("device.attributes['gpu.gpudra.io'].minor == %d", 7-i%2)))
				w0 := countWrites(c.Client.Actions())
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				b.StartTimer()
				if resp, err := c.NodePrepareResources(ctx, claim); err != nil || resp.Claims[string(claim.UID)].Error != "" {
					b.Fatalf("prepare: %v %v", err, resp)
				}
				if _, err := c.Slices(ctx); err != nil {
					b.Fatal(err)
				}
				releaseClaim(b, c, claim)
				if _, err := c.Slices(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.ReadMemStats(&m1)
				mallocs += int64(m1.Mallocs - m0.Mallocs)
				writes += int64(countWrites(c.Client.Actions()) - w0)
				b.StartTimer()
			}
			b.ReportMetric(float64(mallocs)/float64(b.N), "process-allocs/cycle")
			b.ReportMetric(float64(writes)/float64(b.N), "slice-writes/cycle")
		})
	}
}
