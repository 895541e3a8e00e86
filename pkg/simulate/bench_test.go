package simulate

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkNodePrepare measures NodePrepareResources for one whole GPU over
// the real gRPC socket (checkpoint writes and CDI spec included), and
// reports the median and p99 latency over all iterations.
func BenchmarkNodePrepare(b *testing.B) {
	ctx, c := startCluster(b, "dgx-h100")
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		claim := allocatedClaim(b, c, fmt.Sprintf("bench-%d", i), 1)
		b.StartTimer()
		start := time.Now()
		resp, err := c.NodePrepareResources(ctx, claim)
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err != nil || resp.Claims[string(claim.UID)].Error != "" {
			b.Fatalf("prepare: %v %v", err, resp)
		}
		releaseClaim(b, c, claim)
		b.StartTimer()
	}
	reportLatency(b, lat)
}

// BenchmarkNodePrepareConcurrent8 prepares 8 one-GPU claims in 8 concurrent
// calls, as the kubelet does when 8 pods land on a node at once, and reports
// the latency of each call.
func BenchmarkNodePrepareConcurrent8(b *testing.B) {
	ctx, c := startCluster(b, "dgx-h100")
	var lat []time.Duration
	var mu sync.Mutex
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		claims := make([]*resourceapi.ResourceClaim, 8)
		for j := range claims {
			claims[j] = allocatedClaim(b, c, fmt.Sprintf("bench-%d-%d", i, j), 1)
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for _, claim := range claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				resp, err := c.NodePrepareResources(ctx, claim)
				d := time.Since(start)
				if err != nil || resp.Claims[string(claim.UID)].Error != "" {
					b.Errorf("prepare: %v %v", err, resp)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		b.StopTimer()
		for _, claim := range claims {
			releaseClaim(b, c, claim)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
}

func allocatedClaim(b *testing.B, c *Cluster, name string, count int64) *resourceapi.ResourceClaim {
	ctx := b.Context()
	claim, err := c.CreateClaim(ctx, gpuClaim(name, count, ""))
	if err != nil {
		b.Fatal(err)
	}
	claim, err = c.Allocate(ctx, claim)
	if err != nil {
		b.Fatal(err)
	}
	return claim
}

func releaseClaim(b *testing.B, c *Cluster, claim *resourceapi.ResourceClaim) {
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
