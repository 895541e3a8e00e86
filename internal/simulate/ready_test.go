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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

// TestReadyMeansPublished: the plugin is ready once the kubelet registered
// it and the API server holds its ResourceSlices as it built them; a slice
// that goes missing makes it unready until the plugin has published it
// again.
func TestReadyMeansPublished(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: "dgx-h100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Driver.Ready(); err == nil || !strings.Contains(err.Error(), "has not registered") {
		t.Fatalf("ready before the kubelet registered the plugin: %v", err)
	}
	registerLikeKubelet(ctx, t, c)
	waitFor(t, "ready", func() bool { return c.Driver.Ready() == nil })

	// Someone deletes a slice: not ready, until the plugin's publisher
	// puts it back (on its own after its sync delay; a republish, as
	// after a health change, makes it compare at once).
	sl, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.ResourceV1().ResourceSlices().Delete(ctx, sl[len(sl)-1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "unready", func() bool { return c.Driver.Ready() != nil })
	t.Logf("while the slice is missing: %v", c.Driver.Ready())
	// A republish hands the ResourceSlice controller the pool, which it
	// compares with its own informer's cache. That informer is not the
	// plugin's slice watch, and on a busy machine it may not have seen
	// the deletion yet: the compare then finds nothing to do, and the
	// controller would put the slice back only after its sync delay (30
	// s; seen under make test-busy: "timed out waiting for ready again").
	// So republish, as the plugin does on every health change, until the
	// controller has seen the deletion and puts the slice back.
	start := time.Now()
	republishes := 0
	waitFor(t, "ready again", func() bool {
		if c.Driver.Ready() == nil {
			return true
		}
		republishes++
		if err := c.Driver.Republish(ctx); err != nil {
			t.Errorf("republish: %v", err)
		}
		return false
	})
	t.Logf("ready again after %v (%d republishes)", time.Since(start), republishes)
}
