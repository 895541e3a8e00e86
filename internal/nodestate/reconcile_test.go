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
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

func TestReconcile(t *testing.T) {
	crash := errors.New("simulated crash")
	completed := makeClaim(claimSpec{name: "completed", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	half := makeClaim(claimSpec{name: "half", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 1)}})

	tests := []struct {
		name string
		// before runs against the first plugin; it returns what the
		// test compares after the restart.
		before func(t *testing.T, n *node) (spec []byte)
		// rebootID, when set, is the boot ID of the restart.
		rebootID   string
		wantReport ReconcileReport
		after      func(t *testing.T, n *node, s *State, spec []byte)
	}{
		{
			name: "plugin died between PrepareStarted and PrepareCompleted",
			before: func(t *testing.T, n *node) []byte {
				n.hooks.AfterPrepareStarted = func(string) error { return crash }
				s := n.start()
				if _, err := s.Prepare(n.ctx, half); !errors.Is(err, crash) {
					t.Fatalf("Prepare = %v, want the simulated crash", err)
				}
				// It got as far as writing the spec.
				writeSpec(t, n, uidOf("half"), 1)
				n.hooks = Hooks{}
				return nil
			},
			wantReport: ReconcileReport{RolledBack: []string{uidOf("half")}},
			after: func(t *testing.T, n *node, s *State, _ []byte) {
				if got := s.PreparedClaims(); len(got) != 0 {
					t.Errorf("claims after rollback: %v", got)
				}
				if got := n.onDisk(); len(got) != 0 {
					t.Errorf("checkpoint on disk after rollback: %v", got)
				}
				if files := n.specFiles(); len(files) != 0 {
					t.Errorf("CDI spec files after rollback: %v", files)
				}
				// The kubelet's retry prepares the claim in full.
				mustPrepare(t, n.ctx, s, half)
			},
		},
		{
			name: "reboot lost the spec of a prepared claim",
			before: func(t *testing.T, n *node) []byte {
				mustPrepare(t, n.ctx, n.start(), completed)
				spec := n.readSpec(uidOf("completed"))
				if err := os.Remove(n.specPath(uidOf("completed"))); err != nil {
					t.Fatal(err)
				}
				return spec
			},
			rebootID:   "boot-2",
			wantReport: ReconcileReport{Rebooted: true, Rewritten: []string{uidOf("completed")}},
			after: func(t *testing.T, n *node, s *State, spec []byte) {
				if got := n.readSpec(uidOf("completed")); !bytes.Equal(got, spec) {
					t.Errorf("rewritten spec:\n%s\nwant the original:\n%s", got, spec)
				}
				if got := s.PreparedClaims()[uidOf("completed")]; got != checkpoint.PrepareCompleted {
					t.Errorf("claim state %q, want PrepareCompleted", got)
				}
			},
		},
		{
			name: "spec of a claim the checkpoint does not hold",
			before: func(t *testing.T, n *node) []byte {
				mustPrepare(t, n.ctx, n.start(), completed)
				writeSpec(t, n, uidOf("gone"), 1)
				return n.readSpec(uidOf("completed"))
			},
			wantReport: ReconcileReport{RemovedStale: []string{uidOf("gone")}},
			after: func(t *testing.T, n *node, _ *State, spec []byte) {
				if _, err := os.Stat(n.specPath(uidOf("gone"))); !os.IsNotExist(err) {
					t.Errorf("stale spec: %v, want it removed", err)
				}
				if got := n.readSpec(uidOf("completed")); !bytes.Equal(got, spec) {
					t.Error("the prepared claim's spec changed")
				}
			},
		},
		{
			name: "plugin restart without reboot",
			before: func(t *testing.T, n *node) []byte {
				mustPrepare(t, n.ctx, n.start(), completed)
				return nil
			},
			wantReport: ReconcileReport{},
			after:      func(*testing.T, *node, *State, []byte) {},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			spec := tc.before(t, n)
			if tc.rebootID != "" {
				n.bootID = tc.rebootID
			}
			s, report := n.restart()
			if !reflect.DeepEqual(report, tc.wantReport) {
				t.Errorf("Reconcile = %+v, want %+v", report, tc.wantReport)
			}
			tc.after(t, n, s, spec)

			// Reconcile records the boot ID: a second start in the same
			// boot is not a reboot, and has nothing left to do.
			if _, again := n.restart(); !reflect.DeepEqual(again, ReconcileReport{}) {
				t.Errorf("second Reconcile = %+v, want nothing to do", again)
			}
		})
	}
}

// writeSpec writes a claim spec the way Prepare would, for states that only
// a crash leaves behind.
func writeSpec(t *testing.T, n *node, uid string, minor int) {
	t.Helper()
	g := testInventory(n.gpus).GPUs[minor]
	devices := []cdispec.Device{{Name: gpu.WholeDeviceName(minor), Edits: fakeHardware{}.DeviceEdits(g)}}
	if err := n.cdi.WriteClaimSpec(uid, fakeHardware{}.CommonEdits(nil), devices); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesCorruptCheckpoint(t *testing.T) {
	n := newNode(t, 1)
	mustPrepare(t, n.ctx, n.start(), makeClaim(claimSpec{name: "c", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}}))
	data, err := os.ReadFile(n.cpPath)
	if err != nil {
		t.Fatal(err)
	}
	// A flipped character inside the checksummed body.
	i := bytes.Index(data, []byte("PrepareCompleted"))
	data[i] = 'p'
	if err := os.WriteFile(n.cpPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := n.newState(); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("New = %v, want an error wrapping ErrCorrupt", err)
	}
	if got, _ := os.ReadFile(n.cpPath); !bytes.Equal(got, data) {
		t.Error("the corrupt checkpoint was modified")
	}
}
