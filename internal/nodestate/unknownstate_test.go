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
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// TestUnknownStateIsKept: a claim recorded in a state this gpudra does not
// know (a newer gpudra wrote it before a downgrade) is kept as it is and
// reported, never rolled back: its containers may be running. (Before,
// start-up took it for an unfinished prepare and removed its CDI spec.)
func TestUnknownStateIsKept(t *testing.T) {
	n := newNode(t, 2)
	claim := makeClaim(claimSpec{name: "newer", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	mustPrepare(t, n.ctx, n.start(), claim)
	spec := n.readSpec(uidOf("newer"))

	// What a newer gpudra might have left: the same record in a state of
	// its own.
	store := checkpoint.NewStore(n.cpPath)
	cp, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := cp.Claims[uidOf("newer")]
	c.State = "PrepareSharingStarted"
	cp.Claims[uidOf("newer")] = c
	if err := store.Save(cp); err != nil {
		t.Fatal(err)
	}

	s, report := n.restart()
	if want := []string{uidOf("newer")}; !reflect.DeepEqual(report.UnknownState, want) || len(report.RolledBack) != 0 {
		t.Errorf("Reconcile = %+v, want %v kept as of an unknown state and nothing rolled back", report, want)
	}
	if got := n.readSpec(uidOf("newer")); !bytes.Equal(got, spec) {
		t.Error("the claim's CDI spec changed")
	}
	if got := s.PreparedClaims()[uidOf("newer")]; got != "PrepareSharingStarted" {
		t.Errorf("claim state %q, want it kept as PrepareSharingStarted", got)
	}
	if got := n.onDisk()[uidOf("newer")].State; got != "PrepareSharingStarted" {
		t.Errorf("claim state on disk %q, want it kept", got)
	}

	// Its devices stay taken.
	other := makeClaim(claimSpec{name: "other", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
	if _, err := s.Prepare(n.ctx, other); err == nil || !strings.Contains(err.Error(), "already prepared for ResourceClaim") {
		t.Errorf("Prepare of another claim on its GPU = %v, want refused", err)
	}
	// A prepare of the claim itself is refused rather than redone from
	// scratch, and says why.
	if _, err := s.Prepare(n.ctx, claim); err == nil || !strings.Contains(err.Error(), `"PrepareSharingStarted"`) || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("Prepare of the claim = %v, want refused, naming the state", err)
	}
	if got := n.readSpec(uidOf("newer")); !bytes.Equal(got, spec) {
		t.Error("the claim's CDI spec changed after a refused prepare")
	}
	// The kubelet's unprepare, once its pod is gone, releases it.
	if err := s.Unprepare(n.ctx, refOf(claim)); err != nil {
		t.Fatalf("Unprepare: %v", err)
	}
	if files := n.specFiles(); len(files) != 0 {
		t.Errorf("CDI spec files after unprepare: %v", files)
	}
	if got := n.onDisk(); len(got) != 0 {
		t.Errorf("checkpoint after unprepare: %v", got)
	}
}
