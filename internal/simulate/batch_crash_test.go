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
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// TestCrashInsideCheckpointBatch kills the plugin while it writes a
// checkpoint batch that carries the changes of several claims (group
// commit), before the batch reaches the disk and right after it did, at
// each write of a burst of eight concurrent prepares (four 1g.10gb
// partitions created on demand, four whole GPUs).
//
// Whatever the crash point, the restarted plugin must hold exactly the
// claims whose PrepareCompleted reached the disk, which include every claim
// the kubelet was told is prepared, with their MIG instances and CDI
// specs; nothing else may be left on the GPUs; and the kubelet's retries
// must then prepare the rest.
func TestCrashInsideCheckpointBatch(t *testing.T) {
	// The first write is held until all eight claims have recorded
	// PrepareStarted in memory, so that the first two carry all eight
	// (the first's writer gathers the claims arriving with it, the
	// second carries the rest). A clean burst takes 19-20 writes. Each
	// crash point costs ~5 s, so make test tries a spread of them: the
	// big batches (1, 2), MIG steps of several claims (4, 8) and
	// completions (13).
	// GPUDRA_CRASH_SWEEP=1 tries every write up to 24 (~4 minutes).
	points := []int{1, 2, 4, 8, 13}
	if os.Getenv("GPUDRA_CRASH_SWEEP") != "" {
		points = nil
		for w := 1; w <= 24; w++ {
			points = append(points, w)
		}
	}
	for _, after := range []bool{false, true} {
		for _, write := range points {
			phase := "before"
			if after {
				phase = "after"
			}
			t.Run(fmt.Sprintf("%s write %d", phase, write), func(t *testing.T) {
				crashInsideBatch(t, write, after)
			})
		}
	}
}

func crashInsideBatch(t *testing.T, crashAt int, after bool) {
	_, ctx := ktesting.NewTestContext(t)
	errCrash := errors.New("simulated crash")

	var (
		mu      sync.Mutex
		writes  int
		crashed bool
		cluster *Cluster
	)
	// allRecorded waits until every claim of the burst is recorded in
	// memory, i.e. queued behind the write in flight.
	allRecorded := func(n int) {
		_ = wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return len(cluster.Driver.State().PreparedClaims()) >= n, nil
		})
	}
	const burst = 8
	hooks := nodestate.Hooks{
		BeforeCheckpointWrite: func() error {
			mu.Lock()
			if cluster == nil {
				// Before the burst: the plugin records the spare
				// whose MIG placements it publishes (migPublished).
				// Only the burst's writes crash.
				mu.Unlock()
				return nil
			}
			writes++
			n, dead := writes, crashed
			mu.Unlock()
			if n == 1 {
				allRecorded(burst)
			}
			if dead || (!after && n == crashAt) {
				mu.Lock()
				crashed = true
				mu.Unlock()
				return errCrash
			}
			return nil
		},
		AfterCheckpointWrite: func() error {
			mu.Lock()
			defer mu.Unlock()
			if after && cluster != nil && writes == crashAt {
				crashed = true
				return errCrash
			}
			return nil
		},
	}
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Hooks: hooks}, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyClasses(ctx, t, c)
	var claims []*resourceapi.ResourceClaim
	for i := range burst {
		spec := gpuClaim(fmt.Sprintf("gpu-%d", i), 1, "")
		if i%2 == 0 {
			spec = migClaim(fmt.Sprintf("mig-%d", i), false, "1g.10gb")
		}
		claim, err := c.CreateClaim(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if claim, err = c.Allocate(ctx, claim); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, claim)
	}
	// Count only the burst's writes.
	mu.Lock()
	writes, cluster = 0, c
	mu.Unlock()

	var wg sync.WaitGroup
	succeeded := make([]bool, burst)
	for i, claim := range claims {
		wg.Go(func() {
			resp, err := c.NodePrepareResources(ctx, claim)
			if err != nil {
				t.Errorf("prepare %s: %v", claim.Name, err)
				return
			}
			r := resp.Claims[string(claim.UID)]
			switch {
			case r.Error == "":
				succeeded[i] = true
			case !strings.Contains(r.Error, "simulated crash"):
				t.Errorf("prepare %s failed with %q, want success or the simulated crash", claim.Name, r.Error)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	total, didCrash := writes, crashed
	mu.Unlock()
	if !didCrash {
		if total >= crashAt {
			t.Fatalf("no crash at write %d of %d", crashAt, total)
		}
		if slices.Contains(succeeded, false) {
			t.Fatalf("without a crash some prepares failed: %v", succeeded)
		}
		t.Logf("the burst took %d writes: no crash point %d", total, crashAt)
	}

	// The restart finds on disk what the crash left.
	c.Stop()
	c.Opts.Hooks = nodestate.Hooks{}
	if c, err = Start(ctx, c.Opts, c.Client); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	cdi, err := cdispec.New(c.Opts.CDIDir(), c.Opts.DriverName)
	if err != nil {
		t.Fatal(err)
	}
	recorded := c.Driver.State().PreparedClaims()
	var prepared []*resourceapi.ResourceClaim
	for i, claim := range claims {
		state, ok := recorded[string(claim.UID)]
		if ok && state != checkpoint.PrepareCompleted {
			t.Errorf("after restart %s is %s, want it completed or rolled back", claim.Name, state)
		}
		if succeeded[i] && !ok {
			t.Errorf("%s was reported prepared but the restarted plugin does not hold it", claim.Name)
		}
		hasSpec, err := cdi.ClaimSpecExists(string(claim.UID))
		if err != nil {
			t.Fatal(err)
		}
		if hasSpec != ok {
			t.Errorf("after restart %s: recorded %v, CDI spec %v", claim.Name, ok, hasSpec)
		}
		if ok {
			prepared = append(prepared, claim)
		}
	}
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, prepared...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart the hardware holds %v, want %v (the prepared claims' only)", got, want)
	}
	if admin := c.Driver.AdminInstances(); len(admin) != 0 {
		t.Errorf("instances of crashed prepares were taken for an admin's: %v", admin)
	}

	// The kubelet retries every claim: all are prepared, none twice.
	for _, claim := range claims {
		resp, err := c.NodePrepareResources(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.Claims[string(claim.UID)]; r.Error != "" || len(r.Devices) != 1 {
			t.Fatalf("retry of %s = %+v, want one device", claim.Name, r)
		}
	}
	if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, claims...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the retries the hardware holds %v, want %v", got, want)
	}
	for _, claim := range claims {
		if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("after unprepare the hardware holds %v", got)
	}
	assertNothingPrepared(t, c)
}
