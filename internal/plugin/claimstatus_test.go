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

package plugin

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

// statusTest runs a claimStatus against a fake API server whose status
// writes fail while fail returns an error.
type statusTest struct {
	s     *claimStatus
	calls atomic.Int32
	mu    sync.Mutex
	fail  func(call int) error
}

func newStatusTest(t *testing.T, backoff time.Duration, fail func(call int) error) *statusTest {
	st := &statusTest{fail: fail}
	cs := fake.NewClientset()
	cs.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		n := int(st.calls.Add(1))
		st.mu.Lock()
		defer st.mu.Unlock()
		if err := st.fail(n); err != nil {
			return true, nil, err
		}
		return true, &resourceapi.ResourceClaim{}, nil
	})
	st.s = newClaimStatus(cs, "gpu.gpudra.io", "node-1", NewInstruments("node-1"))
	st.s.backoff = backoff
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); st.s.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return st
}

func (st *statusTest) setFail(fail func(call int) error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.fail = fail
}

var testClaim = types.NamespacedName{Namespace: "default", Name: "claim"}

func (st *statusTest) write(key string) {
	st.s.queue(&statusWrite{ref: testClaim, uid: "uid-1", key: key})
}

// waitIdle waits until nothing is queued and returns what was last
// written ("" when nothing was, or the last write failed).
func (st *statusTest) waitIdle(t *testing.T, what string) string {
	t.Helper()
	var written string
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		st.s.mu.Lock()
		defer st.s.mu.Unlock()
		written = st.s.written["uid-1"]
		return len(st.s.pending) == 0, nil
	}); err != nil {
		t.Fatalf("%s: still queued after %d writes", what, st.calls.Load())
	}
	return written
}

func internalError() error { return apierrors.NewInternalError(context.DeadlineExceeded) }

// TestClaimStatusRetries: a write the API server refuses for a while is
// retried until it is taken; once taken, the same status is not written
// again.
func TestClaimStatusRetries(t *testing.T) {
	st := newStatusTest(t, time.Millisecond, func(call int) error {
		if call <= 2 {
			return internalError()
		}
		return nil
	})
	st.write("a")
	if got := st.waitIdle(t, "a write refused twice"); got != "a" {
		t.Errorf("written %q, want a", got)
	}
	if n := st.calls.Load(); n != 3 {
		t.Errorf("%d writes, want 3 (two refused, one taken)", n)
	}
	st.write("a")
	st.s.mu.Lock()
	queued := len(st.s.pending)
	st.s.mu.Unlock()
	if queued != 0 {
		t.Error("a status written already was queued again")
	}
}

// TestClaimStatusGivesUp: a write refused every time is given up after
// statusRetries tries; one refused for good (the claim is gone) after the
// first.
func TestClaimStatusGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{name: "refused each time", err: internalError(), tries: statusRetries},
		{name: "claim gone", err: apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "claim"), tries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStatusTest(t, time.Millisecond, func(int) error { return tc.err })
			st.write("a")
			if got := st.waitIdle(t, tc.name); got != "" {
				t.Errorf("a write never taken is recorded as written (%q)", got)
			}
			if n := st.calls.Load(); int(n) != tc.tries {
				t.Errorf("%d tries, want %d", n, tc.tries)
			}
		})
	}
}

// TestClaimStatusNewerReplacesRetry: a status queued while an older one
// waits for its retry is written instead of it.
func TestClaimStatusNewerReplacesRetry(t *testing.T) {
	// The older write waits an hour for its retry.
	st := newStatusTest(t, time.Hour, func(int) error { return internalError() })
	st.write("a")
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return st.calls.Load() >= 1, nil
	}); err != nil {
		t.Fatal("the first write was never tried")
	}
	st.setFail(func(int) error { return nil })
	st.write("b")
	if got := st.waitIdle(t, "the newer status"); got != "b" {
		t.Errorf("written %q, want b", got)
	}
	if n := st.calls.Load(); n != 2 {
		t.Errorf("%d writes, want 2 (a refused, b taken)", n)
	}
}
