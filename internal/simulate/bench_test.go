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
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// BenchmarkNodePrepare measures NodePrepareResources for one whole GPU over
// the real gRPC socket (checkpoint writes and CDI spec included), and
// reports the median and p99 latency over all iterations and the
// checkpoint writes per claim.
func BenchmarkNodePrepare(b *testing.B) {
	benchPrepare(b, 1, func(name string) *resourceapi.ResourceClaim { return gpuClaim(name, 1, "") })
}

// BenchmarkNodePrepareConcurrent8 prepares 8 one-GPU claims in 8 concurrent
// calls, as the kubelet does when 8 pods land on a node at once, and reports
// the latency of each call. Group commit shows in ckpt-writes/claim: one
// claim alone takes two writes (PrepareStarted, PrepareCompleted).
func BenchmarkNodePrepareConcurrent8(b *testing.B) {
	benchPrepare(b, 8, func(name string) *resourceapi.ResourceClaim { return gpuClaim(name, 1, "") })
}

// BenchmarkNodePrepareMig prepares one 1g.10gb partition, created on
// demand: MIG mode on, GPU and compute instance created through the fake
// NVML (whose state file is written at each step), each step recorded.
func BenchmarkNodePrepareMig(b *testing.B) {
	benchPrepare(b, 1, func(name string) *resourceapi.ResourceClaim { return migClaim(name, false, "1g.10gb") })
}

// benchPrepare prepares n claims at once per iteration, each in its own
// NodePrepareResources call, and unprepares them outside the timer.
func benchPrepare(b *testing.B, n int, newClaim func(name string) *resourceapi.ResourceClaim) {
	_, ctx := ktesting.NewTestContext(b)
	var writes atomic.Int64
	hooks := nodestate.Hooks{BeforeCheckpointWrite: func() error { writes.Add(1); return nil }}
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(b), Hooks: hooks}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	applyClasses(ctx, b, c)

	var lat []time.Duration
	var mu sync.Mutex
	var timedWrites int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		claims := make([]*resourceapi.ResourceClaim, n)
		for j := range claims {
			claims[j] = allocatedClaim(b, c, newClaim(fmt.Sprintf("bench-%d-%d", i, j)))
		}
		before := writes.Load()
		b.StartTimer()
		var wg sync.WaitGroup
		for _, claim := range claims {
			wg.Go(func() {
				start := time.Now()
				resp, err := c.NodePrepareResources(ctx, claim)
				d := time.Since(start)
				if err != nil || resp.Claims[string(claim.UID)].Error != "" {
					b.Errorf("prepare: %v %v", err, resp)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		b.StopTimer()
		timedWrites += writes.Load() - before
		for _, claim := range claims {
			releaseClaim(b, c, claim)
		}
		// The next prepares start on a settled node, as they would on
		// one whose pods come and go less often than the unprepare's
		// republish takes: what they measure is theirs, not the
		// background work of this iteration's unprepares.
		if _, err := c.Slices(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(timedWrites)/float64(len(lat)), "ckpt-writes/claim")
	}
}

// allocatedClaim creates the claim and allocates it as the scheduler
// would. The devices it needs may be on their way back: a released claim
// frees its devices at once, but the slices the plugin republishes after
// the unprepare (a spare's placements) reach the API server a moment
// later; a scheduler would retry the pod, so this waits and retries too,
// up to a bound, instead of failing.
func allocatedClaim(b testing.TB, c *Cluster, claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	ctx := b.Context()
	claim, err := c.CreateClaim(ctx, claim)
	if err != nil {
		b.Fatal(err)
	}
	var allocated *resourceapi.ResourceClaim
	if wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		allocated, err = c.Allocate(ctx, claim)
		if err != nil && !errors.Is(err, ErrUnschedulable) {
			return false, err // not worth a retry
		}
		return err == nil, nil
	}) != nil {
		b.Fatal(err)
	}
	return allocated
}

func releaseClaim(b testing.TB, c *Cluster, claim *resourceapi.ResourceClaim) {
	ctx := b.Context()
	if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
		b.Fatal(err)
	}
	if err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}
