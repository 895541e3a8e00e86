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
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// benchFleet is a busy fleet of DGX H100 nodes as gpudra's plugin
// publishes them (8 GPUs on one NVLink island, every MIG placement): on
// each node GPUs 0-3 are held by a running claim, on every tenth node all
// eight; and 1000 pods wait: 600 for one GPU, 300 for eight on one NVLink
// island, 100 for a 1g.10gb MIG partition.
func benchFleet(b *testing.B, nodes int) Inputs {
	b.Helper()
	ctx := context.Background()
	sl, err := fakenodes.Slices(ctx, "dgx-h100", nodes, driver)
	if err != nil {
		b.Fatal(err)
	}
	m, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
	if err != nil {
		b.Fatal(err)
	}
	// What the controller's informer holds: compact slices, with a UID
	// and a resource version, on which the Strander's cache keys.
	in := Inputs{DriverName: driver, Now: now}
	var compactor Compactor
	for i, s := range sl {
		s.UID = types.UID(fmt.Sprintf("slice-%d", i))
		s.ResourceVersion = "1"
		in.Compact = append(in.Compact, compactor.Compact(s))
	}
	for _, o := range m.Classes {
		in.Classes = append(in.Classes, o.Obj.(*resourceapi.DeviceClass))
	}
	for i := 1; i <= nodes; i++ {
		n := fakenodes.NodeName(i)
		in.Nodes = append(in.Nodes, node(n, true, true))
		busy := []int{0, 1, 2, 3}
		if i%10 == 0 {
			busy = []int{0, 1, 2, 3, 4, 5, 6, 7}
		}
		in.Claims = append(in.Claims, holding("run-"+n, n, busy...))
	}
	pend := func(name, class string, count int64, island bool) {
		c := claim("ns", name, class, time.Minute)
		c.Spec.Devices.Requests[0].Exactly.Count = count
		if island {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/nvlinkGroup"))}}
		}
		in.Claims = append(in.Claims, c)
		in.Pods = append(in.Pods, pod("ns", "pod-"+name, corev1.PodPending, name))
	}
	for i := range 1000 {
		switch {
		case i < 600:
			pend(fmt.Sprintf("one-%d", i), "gpu.gpudra.io", 1, false)
		case i < 900:
			pend(fmt.Sprintf("eight-%d", i), "gpu.gpudra.io", 8, true)
		default:
			pend(fmt.Sprintf("mig-%d", i), "mig-1g.10gb.gpudra.io", 1, false)
		}
	}
	return in
}

// BenchmarkRecompute is one fleet recompute (Strander.Recompute: the
// accounting and the stranded GPUs, slices unchanged since the previous
// one, as between two claim events) of a busy
// fleet of nodes × 8 GPUs with 1000 pending pods. recomputes/min is what a
// steady stream of claim events gets: one per --recompute-interval (10s),
// or back to back when a recompute takes longer.
func BenchmarkRecompute(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			in := benchFleet(b, nodes)
			ctx := context.Background()
			strander := &Strander{}
			if _, err := strander.Recompute(ctx, in); err != nil { // the controller's first recompute
				b.Fatal(err)
			}
			var st Stranding
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				snap, err := strander.Recompute(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if len(snap.Pending) != 1000 {
					b.Fatalf("%d pending claims", len(snap.Pending))
				}
				st = snap.Stranding
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(st.Filters), "filters/op")
			b.ReportMetric(float64(st.Shapes), "shapes")
			b.ReportMetric(float64(st.Unsatisfiable), "unsatisfiable")
			b.ReportMetric(60/max(10*time.Second, per).Seconds(), "recomputes/min")
		})
	}
}
