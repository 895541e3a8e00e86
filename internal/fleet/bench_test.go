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
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// benchFleet is a busy fleet of DGX H100 nodes as gpudra's plugin
// publishes them (8 GPUs on one NVLink island, every MIG placement): on
// each node GPUs 0-3 are held by a running claim, on every tenth node all
// eight; and 1000 pods wait: 600 for one GPU, 300 for eight on one NVLink
// island, 100 for a 1g.10gb MIG partition.
func benchFleet(b *testing.B, nodes int) Inputs {
	b.Helper()
	return benchFleetOf(b, nodes, nil)
}

// benchFleetOf is benchFleet with the nodes' spares as the plugin
// publishes them in fleet mode (--mig-spare-gpus=fleet): the nodes
// spare(i) names keep one spare, the others none. A nil spare is the
// plugin's default, one spare on every node.
func benchFleetOf(b *testing.B, nodes int, spare func(i int) bool) Inputs {
	b.Helper()
	ctx := context.Background()
	var sl []*resourceapi.ResourceSlice
	var err error
	if spare == nil {
		sl, err = fakenodes.Slices(ctx, "dgx-h100", nodes, driver)
	} else {
		sl, err = fleetLayout(ctx, nodes, spare)
	}
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

// fleetLayout are the slices of nodes DGX H100 nodes in fleet mode, the
// nodes spare(i) names keeping one spare.
func fleetLayout(ctx context.Context, nodes int, spare func(i int) bool) ([]*resourceapi.ResourceSlice, error) {
	sl, err := fakenodes.SlicesOf(ctx, "dgx-h100", nodes, driver, fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(0)})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gpudra-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for i := 1; i <= nodes; i++ {
		if !spare(i) {
			continue
		}
		name := fakenodes.NodeName(i)
		with, err := fakenodes.Node(ctx, "dgx-h100", name, driver, dir, fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(1)})
		if err != nil {
			return nil, err
		}
		sl = slices.DeleteFunc(sl, func(s *resourceapi.ResourceSlice) bool { return *s.Spec.NodeName == name })
		sl = append(sl, with...)
	}
	return sl, nil
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

// BenchmarkRecomputeUnplaced is BenchmarkRecompute's 1000-node fleet in
// fleet mode (a spare on one node in twenty: nodes 1, 21, 41, ...) with
// waiting pods that fit on no node now added, each its own shape (its
// request named apart): what looking for a node where a spare would let
// them in (sparefit.go) adds to a recompute. spare-helps are 1g.10gb
// partition pods allowed on the even nodes (zone z2: 500 nodes, none
// keeping a spare, 450 with free GPUs); none-helps are pods for nine
// whole GPUs, allowed on every node. Compare each case's ns/op with
// unplaced=0's.
func BenchmarkRecomputeUnplaced(b *testing.B) {
	const nodes = 1000
	var base Inputs
	built := false
	for _, tc := range []struct {
		name  string
		count int
		helps bool
	}{
		{"unplaced=0", 0, false},
		{"spare-helps/unplaced=10", 10, true},
		{"spare-helps/unplaced=100", 100, true},
		{"none-helps/unplaced=10", 10, false},
		{"none-helps/unplaced=100", 100, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if !built {
				base = benchFleetOf(b, nodes, func(i int) bool { return i%20 == 1 })
				for i, n := range base.Nodes {
					n.Labels = map[string]string{"zone": fmt.Sprintf("z%d", 2-(i+1)%2)}
				}
				built = true
			}
			in := base
			in.Claims = slices.Clone(base.Claims)
			in.Pods = slices.Clone(base.Pods)
			for k := range tc.count {
				name := fmt.Sprintf("unplaced-%d", k)
				var c *resourceapi.ResourceClaim
				p := pod("ns", "pod-"+name, corev1.PodPending, name)
				if tc.helps {
					c = claim("ns", name, "mig-1g.10gb.gpudra.io", time.Minute)
					p.Spec.NodeSelector = map[string]string{"zone": "z2"}
				} else {
					c = claim("ns", name, "gpu.gpudra.io", time.Minute)
					c.Spec.Devices.Requests[0].Exactly.Count = 9
				}
				c.Spec.Devices.Requests[0].Name = fmt.Sprintf("r%d", k) // a shape of its own
				in.Claims = append(in.Claims, c)
				in.Pods = append(in.Pods, p)
			}
			ctx := context.Background()
			strander := &Strander{}
			snap, err := strander.Recompute(ctx, in) // the controller's first recompute
			if err != nil {
				b.Fatal(err)
			}
			// What is measured is what the test says: the added pods fit
			// nowhere, and a spare helps them where it should.
			added := 0
			for _, u := range snap.Stranding.Unplaced {
				if !strings.HasPrefix(u.Pod, "ns/pod-unplaced-") {
					continue
				}
				added++
				if helped := len(u.Nodes) > 0; helped != tc.helps {
					b.Fatalf("%s: helped by a spare on %d nodes, want helped %v", u.Pod, len(u.Nodes), tc.helps)
				}
			}
			if added != tc.count {
				b.Fatalf("%d of the %d added pods unplaced", added, tc.count)
			}
			var st Stranding
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				snap, err := strander.Recompute(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				st = snap.Stranding
			}
			b.ReportMetric(float64(st.Filters), "filters/op")
			b.ReportMetric(float64(len(st.Unplaced)), "unplaced")
		})
	}
}
