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
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestEnsureSpecs: a prepared claim's CDI spec deleted under a running
// plugin is written again, identical, and nothing else is touched.
func TestEnsureSpecs(t *testing.T) {
	n := newNode(t, 2)
	s := n.start()
	for i, name := range []string{"a", "b"} {
		mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: name, results: []resourceapi.DeviceRequestAllocationResult{result("gpu", i)}}))
	}
	spec := n.readSpec(uidOf("a"))
	if got, err := s.EnsureSpecs(n.ctx); err != nil || len(got) != 0 {
		t.Fatalf("EnsureSpecs with every spec there = %v, %v", got, err)
	}
	if err := os.Remove(n.specPath(uidOf("a"))); err != nil {
		t.Fatal(err)
	}
	got, err := s.EnsureSpecs(n.ctx)
	if err != nil || !reflect.DeepEqual(got, []string{uidOf("a")}) {
		t.Fatalf("EnsureSpecs = %v, %v; want [%s]", got, err, uidOf("a"))
	}
	if !bytes.Equal(n.readSpec(uidOf("a")), spec) {
		t.Error("the rewritten spec differs from the first")
	}
}
