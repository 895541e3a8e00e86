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

package nodestate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// heldWrites makes the checkpoint writes of a node wait: write number
// hold (from 1) blocks in BeforeCheckpointWrite until release is called,
// and then runs then (which may break or repair the disk).
type heldWrites struct {
	writes  atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func holdWrite(n *node, hold int32, then func()) *heldWrites {
	h := &heldWrites{entered: make(chan struct{}), release: make(chan struct{})}
	n.hooks.BeforeCheckpointWrite = func() error {
		if h.writes.Add(1) == hold {
			close(h.entered)
			<-h.release
			if then != nil {
				then()
			}
		}
		return nil
	}
	return h
}

// waitForChanges waits until the state has registered n changes since the
// start, i.e. n callers have made their change and wait for its write.
func waitForChanges(t *testing.T, s *State, n uint64) {
	t.Helper()
	var gen uint64
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		gen = s.commits.gen
		s.mu.Unlock()
		return gen >= n, nil
	})
	if err != nil {
		t.Fatalf("only %d of %d changes registered", gen, n)
	}
}

func record(name string, minor int) *checkpoint.Claim {
	return &checkpoint.Claim{UID: uidOf(name), Namespace: "default", Name: name, State: checkpoint.PrepareStarted,
		Devices: []checkpoint.Device{{Requests: []string{"gpu"}, Pool: testNode, Device: fmt.Sprintf("gpu-%d", minor), GPUUUID: gpuUUID(minor)}}}
}

// TestGroupCommit: changes that arrive while a write is in flight share the
// next write, and each caller returns only once its change is on disk.
func TestGroupCommit(t *testing.T) {
	n := newNode(t, 8)
	held := holdWrite(n, 1, nil)
	s := n.start()

	errs := make([]error, 8)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = s.putClaim(uidOf("c0"), record("c0", 0)) })
	<-held.entered
	for i := 1; i < 8; i++ {
		wg.Go(func() { errs[i] = s.putClaim(uidOf(fmt.Sprintf("c%d", i)), record(fmt.Sprintf("c%d", i), i)) })
	}
	waitForChanges(t, s, 8)
	if got := len(n.onDisk()); got != 0 {
		t.Fatalf("%d claims on disk while the first write is held, want none", got)
	}
	close(held.release)
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("putClaim c%d: %v", i, err)
		}
	}
	if got := held.writes.Load(); got != 2 {
		t.Errorf("%d writes for 8 changes, want 2 (the held one, then one batch of 7)", got)
	}
	if got := len(n.onDisk()); got != 8 {
		t.Errorf("%d claims on disk, want 8", got)
	}
}

// TestGroupCommitFailure: a write that fails takes out of memory exactly
// the changes it carried, before any later write can carry them; changes
// queued behind it are written by the next write.
func TestGroupCommitFailure(t *testing.T) {
	n := newNode(t, 8)
	var repair func()
	held := holdWrite(n, 1, func() { repair = breakCheckpoint(t, n) })
	// The second write runs on a repaired disk.
	hold := n.hooks.BeforeCheckpointWrite
	n.hooks.BeforeCheckpointWrite = func() error {
		if held.writes.Load() == 1 && repair != nil {
			repair()
			repair = nil
		}
		return hold()
	}
	s := n.start()

	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { errA = s.putClaim(uidOf("a"), record("a", 0)) })
	<-held.entered
	wg.Go(func() { errB = s.putClaim(uidOf("b"), record("b", 1)) })
	waitForChanges(t, s, 2)
	close(held.release)
	wg.Wait()

	if errA == nil || !strings.Contains(errA.Error(), "write checkpoint") {
		t.Errorf("the change in the failed write: %v, want the write's error", errA)
	}
	if errB != nil {
		t.Errorf("the change queued behind the failed write: %v, want it written by the next", errB)
	}
	for where, claims := range map[string]map[string]checkpoint.State{"memory": s.PreparedClaims(), "disk": states(n.onDisk())} {
		if _, ok := claims[uidOf("a")]; ok {
			t.Errorf("the failed change is in %s", where)
		}
		if _, ok := claims[uidOf("b")]; !ok {
			t.Errorf("the change written after the failure is not in %s", where)
		}
	}
}

func states(claims map[string]checkpoint.Claim) map[string]checkpoint.State {
	out := map[string]checkpoint.State{}
	for uid, c := range claims {
		out[uid] = c.State
	}
	return out
}

// TestForgottenClaimFreesDevicesOnceWritten: while the write that forgets
// an unprepared claim is in flight, its GPU still counts as taken: were
// that write to fail, the claim would be back, and two claims would hold
// one GPU.
func TestForgottenClaimFreesDevicesOnceWritten(t *testing.T) {
	n := newNode(t, 2)
	old := makeClaim(claimSpec{name: "old", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	next := makeClaim(claimSpec{name: "next", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	// Prepare writes twice; the unprepare's write is the third.
	held := holdWrite(n, 3, nil)
	s := n.start()
	mustPrepare(t, n.ctx, s, old)

	unprepared := make(chan error, 1)
	go func() { unprepared <- s.Unprepare(n.ctx, refOf(old)) }()
	<-held.entered
	waitForChanges(t, s, 3)
	prepared := make(chan error, 1)
	go func() {
		_, err := s.Prepare(n.ctx, next)
		prepared <- err
	}()
	select {
	case err := <-prepared:
		if err == nil || !strings.Contains(err.Error(), "already prepared for ResourceClaim default/old") {
			t.Errorf("Prepare on the GPU of a claim whose forgetting is not on disk yet = %v, want refused", err)
		}
	case <-time.After(10 * time.Second):
		// It passed the check and waits for its PrepareStarted to be
		// written behind the held write.
		t.Fatal("Prepare on the GPU of a claim whose forgetting is not on disk yet went ahead")
	}
	close(held.release)
	if err := <-unprepared; err != nil {
		t.Fatal(err)
	}
	mustPrepare(t, n.ctx, s, next)
}

// TestCommitCrash: a crash reported by a hook reaches every caller whose
// change the write carried, as a crash (no rollback follows).
func TestCommitCrash(t *testing.T) {
	n := newNode(t, 2)
	boom := errors.New("boom")
	n.hooks.AfterCheckpointWrite = func() error { return boom }
	s := n.start()
	err := s.putClaim(uidOf("a"), record("a", 0))
	if !errors.Is(err, boom) || !isCrash(err) {
		t.Errorf("putClaim = %v, want the crash", err)
	}
	if _, ok := n.onDisk()[uidOf("a")]; !ok {
		t.Error("a crash after the write lost the write")
	}
}

// TestGroupCommitGathersArrivals: the writer of a batch waits for the
// prepares on their way to their first change, so that a burst's
// PrepareStarted records share one write instead of the first going out
// alone; a prepare that never arrives holds the write up no longer than
// maxGather.
func TestGroupCommitGathersArrivals(t *testing.T) {
	n := newNode(t, 8)
	var writes atomic.Int32
	n.hooks.BeforeCheckpointWrite = func() error { writes.Add(1); return nil }
	s := n.start()
	s.commits.maxGather = time.Minute // deterministic: only the arrival ends the wait

	s.commits.arriving.Add(1) // b is on its way
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { errA = s.putClaim(uidOf("a"), record("a", 0)) })
	waitForChanges(t, s, 1)
	time.Sleep(10 * time.Millisecond) // a's writer is waiting for b
	if got := len(n.onDisk()); got != 0 {
		t.Fatalf("%d claims on disk while a prepare is arriving, want none", got)
	}
	s.mu.Lock()
	gen := s.putClaimLocked(uidOf("b"), record("b", 1))
	s.mu.Unlock()
	s.commits.arriving.Add(-1)
	errB = s.commit(gen)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("commits: %v, %v", errA, errB)
	}
	if got := writes.Load(); got != 1 {
		t.Errorf("%d writes for a and the arriving b, want 1", got)
	}
	if got := len(n.onDisk()); got != 2 {
		t.Errorf("%d claims on disk, want 2", got)
	}

	// One that never arrives: the write goes out after maxGather.
	s.commits.maxGather = 20 * time.Millisecond
	s.commits.arriving.Add(1)
	defer s.commits.arriving.Add(-1)
	start := time.Now()
	if err := s.putClaim(uidOf("c"), record("c", 2)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < s.commits.maxGather {
		t.Errorf("the write went out after %v, before maxGather", d)
	}
	if _, ok := n.onDisk()[uidOf("c")]; !ok {
		t.Error("c is not on disk")
	}
}
