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
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

func TestConcurrentPrepare(t *testing.T) {
	tests := []struct {
		name string
		// claims[i] is the claim goroutine i prepares.
		claims     []*resourceapi.ResourceClaim
		wantClaims int
	}{
		{
			name: "16 claims on 16 GPUs",
			claims: func() []*resourceapi.ResourceClaim {
				var cs []*resourceapi.ResourceClaim
				for i := range 16 {
					cs = append(cs, makeClaim(claimSpec{name: fmt.Sprintf("c%d", i), results: []resourceapi.DeviceRequestAllocationResult{result("gpu", i)}}))
				}
				return cs
			}(),
			wantClaims: 16,
		},
		{
			// The kubelet retries a call that timed out while the first
			// is still running.
			name: "one claim from 4 goroutines",
			claims: func() []*resourceapi.ResourceClaim {
				c := makeClaim(claimSpec{name: "same", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0), result("gpu", 1)}})
				return []*resourceapi.ResourceClaim{c, c, c, c}
			}(),
			wantClaims: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 16)
			s := n.start()
			results := make([][]PreparedDevice, len(tc.claims))
			errs := make([]error, len(tc.claims))
			var wg sync.WaitGroup
			for i, c := range tc.claims {
				wg.Go(func() { results[i], errs[i] = s.Prepare(n.ctx, c) })
			}
			wg.Wait()

			for i, err := range errs {
				if err != nil {
					t.Errorf("Prepare #%d (%s): %v", i, tc.claims[i].Name, err)
				}
			}
			for i, r := range results {
				if tc.claims[i] == tc.claims[0] && !reflect.DeepEqual(r, results[0]) {
					t.Errorf("Prepare #%d of the same claim = %+v, want %+v", i, r, results[0])
				}
			}
			onDisk := n.onDisk()
			if len(onDisk) != tc.wantClaims {
				t.Errorf("checkpoint on disk holds %d claims, want %d", len(onDisk), tc.wantClaims)
			}
			for _, c := range tc.claims {
				if got := onDisk[string(c.UID)].State; got != checkpoint.PrepareCompleted {
					t.Errorf("claim %s on disk: %q, want PrepareCompleted", c.Name, got)
				}
			}
			if files := n.specFiles(); len(files) != tc.wantClaims {
				t.Errorf("%d CDI spec files, want %d: %v", len(files), tc.wantClaims, files)
			}
		})
	}
}

// breakCheckpoint makes every save fail until the returned function is
// called: the checkpoint file is moved aside and a directory takes its
// place, which no rename can replace. (Tests run as root, so permissions
// would not stop a write.)
func breakCheckpoint(t *testing.T, n *node) (repair func()) {
	t.Helper()
	aside := n.cpPath + ".aside"
	hadFile := true
	if err := os.Rename(n.cpPath, aside); os.IsNotExist(err) {
		hadFile = false
	} else if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.cpPath+"/blocker", 0o700); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.RemoveAll(n.cpPath); err != nil {
			t.Fatal(err)
		}
		if hadFile {
			if err := os.Rename(aside, n.cpPath); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestCheckpointSaveFails(t *testing.T) {
	claim := makeClaim(claimSpec{name: "c", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	tests := []struct {
		name string
		// breakAfterStarted breaks the checkpoint once PrepareStarted is
		// on disk, so that only PrepareCompleted cannot be recorded;
		// otherwise it is broken before Prepare.
		breakAfterStarted bool
		wantErr           string
		// wantState is the claim's state in memory after the failure; it
		// must match the disk, "" meaning not recorded.
		wantState checkpoint.State
	}{
		{name: "PrepareStarted cannot be recorded", wantErr: "record PrepareStarted"},
		{name: "PrepareCompleted cannot be recorded", breakAfterStarted: true, wantErr: "record PrepareCompleted", wantState: checkpoint.PrepareStarted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			// A neighbour prepared before the failure must survive it.
			mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: "keep", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 1)}}))
			var repair func()
			if tc.breakAfterStarted {
				s.opts.Hooks.AfterPrepareStarted = func(string) error {
					repair = breakCheckpoint(t, n)
					return nil
				}
			} else {
				repair = breakCheckpoint(t, n)
			}

			_, err := s.Prepare(n.ctx, claim)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "default/c") {
				t.Fatalf("Prepare = %v, want an error naming the claim and %q", err, tc.wantErr)
			}
			// No container may get a device the checkpoint does not
			// hold as prepared.
			if _, err := os.Stat(n.specPath(uidOf("c"))); !os.IsNotExist(err) {
				t.Errorf("CDI spec of the failed claim: %v, want none", err)
			}
			if got := s.PreparedClaims()[uidOf("c")]; got != tc.wantState {
				t.Errorf("claim state in memory %q, want %q (what the disk holds)", got, tc.wantState)
			}

			// Once the disk is back, the kubelet's retry succeeds: a
			// failed save must not wedge the node.
			repair()
			if got := n.onDisk()[uidOf("c")].State; got != tc.wantState {
				t.Errorf("claim state on disk %q, want %q", got, tc.wantState)
			}
			s.opts.Hooks = Hooks{}
			mustPrepare(t, n.ctx, s, claim)
			for _, name := range []string{"c", "keep"} {
				if got := n.onDisk()[uidOf(name)].State; got != checkpoint.PrepareCompleted {
					t.Errorf("after the retry claim %s is %q on disk, want PrepareCompleted", name, got)
				}
				if got := s.PreparedClaims()[uidOf(name)]; got != checkpoint.PrepareCompleted {
					t.Errorf("after the retry claim %s is %q in memory, want PrepareCompleted", name, got)
				}
			}
			if _, report := n.restart(); len(report.RolledBack)+len(report.Rewritten)+len(report.RemovedStale) != 0 {
				t.Errorf("restart after the retry had work to do: %+v", report)
			}
		})
	}
}

// TestUnprepareWaitsForPrepare: the kubelet may unprepare a claim (its pod
// was deleted) while a prepare of it is still running. Were the two to
// interleave, the prepare would record the claim and write its spec after
// the unprepare had removed them, and the GPU would stay taken for good.
func TestUnprepareWaitsForPrepare(t *testing.T) {
	n := newNode(t, 1)
	s := n.start()
	claim := makeClaim(claimSpec{name: "racy", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	unprepared := make(chan error, 1)
	s.opts.Hooks.AfterPrepareStarted = func(string) error {
		go func() { unprepared <- s.Unprepare(n.ctx, refOf(claim)) }()
		// Give an Unprepare that does not wait the time to finish
		// inside the prepare.
		select {
		case err := <-unprepared:
			unprepared <- err
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	}
	mustPrepare(t, n.ctx, s, claim)
	if err := <-unprepared; err != nil {
		t.Fatalf("Unprepare: %v", err)
	}
	if got := s.PreparedClaims(); len(got) != 0 {
		t.Errorf("claims recorded after the unprepare: %v", got)
	}
	if got := n.onDisk(); len(got) != 0 {
		t.Errorf("checkpoint on disk after the unprepare: %v", got)
	}
	if files := n.specFiles(); len(files) != 0 {
		t.Errorf("CDI spec files after the unprepare: %v", files)
	}
}
