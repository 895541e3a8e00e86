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
	"os"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestMissingCheckpointWithPreparedClaims: a node whose checkpoint is gone
// while CDI specs of this driver are still there (the file was deleted,
// the plugin data directory wiped) is not a fresh node: the plugin refuses
// to start, touches nothing, and says how to get out. (Before, start-up
// took the specs of running claims for stale ones and deleted them.)
func TestMissingCheckpointWithPreparedClaims(t *testing.T) {
	n := newNode(t, 2)
	s := n.start()
	for i, name := range []string{"running-a", "running-b"} {
		mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: name, results: []resourceapi.DeviceRequestAllocationResult{result("gpu", i)}}))
	}
	specA, specB := n.readSpec(uidOf("running-a")), n.readSpec(uidOf("running-b"))
	if err := os.Remove(n.cpPath); err != nil {
		t.Fatal(err)
	}

	_, err := n.newState()
	if err == nil {
		t.Fatal("New started without a checkpoint while CDI specs of prepared claims exist")
	}
	for _, want := range []string{
		n.cpPath, "is missing", uidOf("running-a"), uidOf("running-b"), n.cdiDir,
		"restore", "no pod", "remove", "restart",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if !bytes.Equal(n.readSpec(uidOf("running-a")), specA) || !bytes.Equal(n.readSpec(uidOf("running-b")), specB) {
		t.Error("a CDI spec changed")
	}
	if _, err := os.Stat(n.cpPath); !os.IsNotExist(err) {
		t.Errorf("a checkpoint was written by the refused start: %v", err)
	}

	// The way out: with the specs gone (their pods gone too), the node
	// starts afresh.
	for _, uid := range []string{uidOf("running-a"), uidOf("running-b")} {
		if err := os.Remove(n.specPath(uid)); err != nil {
			t.Fatal(err)
		}
	}
	s, report := n.restart()
	if len(s.PreparedClaims()) != 0 || len(report.RemovedStale) != 0 {
		t.Errorf("restart after the way out: claims %v, report %+v", s.PreparedClaims(), report)
	}
}

// TestFreshNodeStarts: no checkpoint and no spec of this driver (other
// drivers' specs do not count) is a fresh node.
func TestFreshNodeStarts(t *testing.T) {
	n := newNode(t, 1)
	if err := os.WriteFile(n.cdiDir+"/nvidia.com-gpu.yaml", []byte("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.newState(); err != nil {
		t.Fatalf("New on a fresh node: %v", err)
	}
}
