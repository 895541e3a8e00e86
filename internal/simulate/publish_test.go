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
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gpudra/gpudra/internal/plugin"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// sliceWatch follows every write to the node's ResourceSlices: how many
// there were, the pool generations seen, and how many writes left the
// pool incomplete (the allocator then allocates nothing on the node).
type sliceWatch struct {
	mu         sync.Mutex
	held       map[string]resourceapi.ResourceSlice
	writes     int
	incomplete int
	gens       map[int64]bool
}

func watchSlices(ctx context.Context, t testing.TB, c *Cluster) *sliceWatch {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw := &sliceWatch{held: map[string]resourceapi.ResourceSlice{}, gens: map[int64]bool{}}
	for _, s := range list.Items {
		sw.held[s.Name] = s
		sw.gens[s.Spec.Pool.Generation] = true
	}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*resourceapi.ResourceSlice)
			if !ok {
				continue
			}
			sw.mu.Lock()
			if old, ok := sw.held[s.Name]; ok && ev.Type == watch.Added && old.ResourceVersion == s.ResourceVersion {
				sw.mu.Unlock()
				continue // the watch replays what the list returned
			}
			if ev.Type == watch.Deleted {
				delete(sw.held, s.Name)
			} else {
				sw.held[s.Name] = *s
				sw.gens[s.Spec.Pool.Generation] = true
			}
			sw.writes++
			if !sw.completeLocked() {
				sw.incomplete++
			}
			sw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return sw
}

func (sw *sliceWatch) completeLocked() bool {
	var newest int64
	n := 0
	for _, s := range sw.held {
		switch g := s.Spec.Pool.Generation; {
		case g > newest:
			newest, n = g, 1
		case g == newest:
			n++
		}
	}
	for _, s := range sw.held {
		if s.Spec.Pool.Generation == newest && int64(n) != s.Spec.Pool.ResourceSliceCount {
			return false
		}
	}
	return n > 0
}

// counts returns the writes seen, the writes after which the pool was
// incomplete, and the generations seen.
func (sw *sliceWatch) counts() (writes, incomplete, generations int) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.writes, sw.incomplete, len(sw.gens)
}

// settled waits until the plugin has published what it wants and a
// moment has passed without writes, and returns the writes so far.
func (sw *sliceWatch) settled(ctx context.Context, t testing.TB, c *Cluster) int {
	t.Helper()
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	for last := -1; ; time.Sleep(200 * time.Millisecond) {
		w, _, _ := sw.counts()
		if w == last {
			return w
		}
		last = w
		if _, err := c.Slices(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPublishOneSliceAtATime runs claims through prepare and unprepare on
// an 8-GPU node and counts the ResourceSlice writes each change costs, as
// the real ResourceSlice controller makes them: a whole GPU that does not
// publish its MIG placements costs nothing taken or freed; a GPU that
// starts publishing them costs three (its counter set, its whole device
// consumes it, then its placements), one that stops three (placements,
// its whole device's counters, its counter set; two of them shared with
// the next spare's, which goes into the counter slice beside it first). The pool keeps its generation throughout and is complete
// after every single write, so the scheduler can allocate on the node at
// every moment; and it does.
func TestPublishOneSliceAtATime(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	sw := watchSlices(ctx, t, c)
	base := sw.settled(ctx, t, c)

	steps := []struct {
		name   string
		run    func() []*PodResult
		writes int
	}{
		{"the spare taken whole: hidden, and the next GPU the spare, one slice at a time", func() []*PodResult {
			return []*PodResult{mustRun(ctx, t, c, gpuClaim("seven", 1, "", "device.attributes['gpu.gpudra.io'].minor == 7"))}
		}, 5},
		{"a whole GPU (no placements published)", func() []*PodResult { return []*PodResult{mustRun(ctx, t, c, gpuClaim("whole", 1, ""))} }, 0},
		{"a partition on the spare: the next GPU becomes the spare", func() []*PodResult {
			return []*PodResult{mustRun(ctx, t, c, migClaim("part", false, "1g.10gb"))}
		}, 3},
		{"a second partition packs beside the first", func() []*PodResult {
			return []*PodResult{mustRun(ctx, t, c, migClaim("part2", false, "1g.10gb"))}
		}, 0},
		{"the five free GPUs, the spare among them: its placements hidden", func() []*PodResult {
			return []*PodResult{mustRun(ctx, t, c, gpuClaim("five", 5, ""))}
		}, 3},
	}
	var held []*PodResult
	for _, st := range steps {
		before := sw.settled(ctx, t, c)
		res := st.run()
		held = append(held, res...)
		if got := sw.settled(ctx, t, c) - before; got != st.writes {
			t.Errorf("%s: %d ResourceSlice writes, want %d", st.name, got, st.writes)
		}
	}
	if d := allocatedDevices(held[2])[0]; !strings.HasPrefix(d, "gpu-6-mig-") {
		t.Errorf("the first partition is %s, want one of the spare, GPU 6", d)
	}
	if d := allocatedDevices(held[3])[0]; !strings.HasPrefix(d, "gpu-6-mig-") {
		t.Errorf("the second partition is %s, want one beside the first, on GPU 6", d)
	}
	// GPU 7 freed first: no GPU is a spare (GPU 6 is partitioned, the
	// rest taken), so it becomes one again. Then the rest: no spare is
	// missing, GPU 6 stays published once free (a partition allocated
	// there may still be on its way to the node), and nothing is written.
	for i, want := range []int{3, 0, 0, 0, 0} {
		before := sw.settled(ctx, t, c)
		if err := c.StopPod(ctx, held[i]); err != nil {
			t.Fatal(err)
		}
		if got := sw.settled(ctx, t, c) - before; got != want {
			t.Errorf("freeing %s: %d writes, want %d", held[i].Pod, got, want)
		}
	}
	writes, incomplete, gens := sw.counts()
	t.Logf("%d ResourceSlice writes after the initial publish", writes-base)
	if gens != 1 || incomplete != 0 {
		t.Errorf("%d pool generations seen, %d writes left the pool incomplete; want 1 and 0", gens, incomplete)
	}
}

// TestConcurrentPreparesKeepTheGeneration: eight claims prepared at once
// (eight pods landing on a node together), then released, over and over:
// the republishes they cause never start a new pool generation and never
// leave the pool incomplete (upstream's controller would rewrite all the
// node's slices for every republish that changes two of them, during
// which the scheduler can place nothing on the node).
func TestConcurrentPreparesKeepTheGeneration(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	sw := watchSlices(ctx, t, c)
	base := sw.settled(ctx, t, c)
	const rounds = 5
	for round := range rounds {
		claims := make([]*resourceapi.ResourceClaim, 8)
		for i := range claims {
			claim, err := c.CreateClaim(ctx, gpuClaim(fmt.Sprintf("r%d-%d", round, i), 1, ""))
			if err != nil {
				t.Fatal(err)
			}
			if claims[i], err = c.Allocate(ctx, claim); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var wg sync.WaitGroup
		for _, claim := range claims {
			wg.Go(func() {
				if resp, err := c.NodePrepareResources(ctx, claim); err != nil || resp.Claims[string(claim.UID)].Error != "" {
					t.Errorf("prepare %s: %v %v", claim.Name, err, resp)
				}
			})
		}
		wg.Wait()
		for _, claim := range claims {
			if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	writes := sw.settled(ctx, t, c) - base
	_, incomplete, gens := sw.counts()
	t.Logf("%d rounds of 8 concurrent prepares: %d ResourceSlice writes", rounds, writes)
	// Per round: the spare taken whole (placements hidden, then its
	// counters dropped), freed (counters, then placements published again).
	if writes > 4*rounds || gens != 1 || incomplete != 0 {
		t.Errorf("%d writes (want at most %d), %d pool generations, %d writes left the pool incomplete (want 1 and 0)", writes, 4*rounds, gens, incomplete)
	}
}

func mustRun(ctx context.Context, t testing.TB, c *Cluster, claim *resourceapi.ResourceClaim) *PodResult {
	t.Helper()
	res, err := createAndRun(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSpareLimits: one pod gets at most the partitions published at that
// moment. With one spare (the default), a claim for two 4g.40gb (two GPUs'
// worth) is unschedulable on an idle node, and stays so: nothing
// republishes for a pending claim. With two spares it fits, on the two
// highest minors.
func TestSpareLimits(t *testing.T) {
	for _, tc := range []struct {
		spares string
		fits   bool
	}{{"1", false}, {"2", true}} {
		t.Run("spares="+tc.spares, func(t *testing.T) {
			spare, err := slicebuilder.ParseSpareGPUs(tc.spares)
			if err != nil {
				t.Fatal(err)
			}
			ctx, c := startClusterWith(t, Options{Profile: "dgx-h100", SpareGPUs: spare})
			// Only fleet mode has spares assigned by gpudra-controller.
			if got := sparesAssigned(t, c); got != -1 {
				t.Errorf("%s is exported (%v) with --mig-spare-gpus=%s", plugin.MetricMigSparesAssigned.Name, got, tc.spares)
			}
			claim, err := c.CreateClaim(ctx, migClaim("two-halves", false, "4g.40gb", "4g.40gb"))
			if err != nil {
				t.Fatal(err)
			}
			allocated, err := c.Allocate(ctx, claim)
			switch {
			case tc.fits && err != nil:
				t.Fatalf("two 4g.40gb with %s spares: %v", tc.spares, err)
			case !tc.fits && !errors.Is(err, ErrUnschedulable):
				t.Fatalf("two 4g.40gb with %s spare: %v, want unschedulable", tc.spares, err)
			case tc.fits:
				var got []string
				for _, r := range allocated.Status.Allocation.Devices.Results {
					got = append(got, r.Device)
				}
				sort.Strings(got)
				if want := []string{"gpu-6-mig-4g40gb-0", "gpu-7-mig-4g40gb-0"}; !slices.Equal(got, want) {
					t.Errorf("allocated %v, want %v", got, want)
				}
			}
		})
	}
}
