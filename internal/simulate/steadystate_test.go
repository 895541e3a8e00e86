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
	"testing"
	"time"

	k8stesting "k8s.io/client-go/testing"
)

// TestSteadyStateNoWrites: republishing an unchanged inventory issues no API
// writes, however often it happens (health resends, restarts of
// the publishing loop); every write fans out to every ResourceSlice watcher
// in the cluster.
func TestSteadyStateNoWrites(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, c) // the start-up sync's writes are not counted
	before := countWrites(c.Client.Actions())
	for i := 0; i < 100; i++ {
		if err := c.Driver.Republish(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing to wait for but writes that must not come: a window long
	// enough for the ResourceSlice controller to act on a change.
	time.Sleep(time.Second)
	if got := countWrites(c.Client.Actions()) - before; got != 0 {
		t.Errorf("100 republishes of an unchanged inventory issued %d ResourceSlice writes, want 0", got)
	}
}

func countWrites(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetResource().Resource != "resourceslices" {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "delete-collection":
			n++
		}
	}
	return n
}
