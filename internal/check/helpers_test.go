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

package check

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
)

var inventories sync.Map // "profile/nodes/pool" → *inventoryOnce

type inventoryOnce struct {
	once   sync.Once
	slices []*resourceapi.ResourceSlice
	err    error
}

// fakeInventory is what gpudra publishes on nodes fake nodes of a profile,
// built once per test binary: tests must not change it.
func fakeInventory(t testing.TB, profile string, nodes int) []*resourceapi.ResourceSlice {
	return fakePoolInventory(t, profile, nodes, fakenodes.Pool{})
}

// fakePoolInventory is fakeInventory on a node pool with these settings.
func fakePoolInventory(t testing.TB, profile string, nodes int, pool fakenodes.Pool) []*resourceapi.ResourceSlice {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%v/%v/%v/%v/%d", profile, nodes, pool.ConsumableCapacity, pool.MigProfiles, pool.WholeGPUsOnly, pool.SpareGPUs, pool.SpareNodes)
	if pool.Features != nil {
		key += "/" + pool.Features.Version
	}
	v, _ := inventories.LoadOrStore(key, &inventoryOnce{})
	inv := v.(*inventoryOnce)
	inv.once.Do(func() {
		inv.slices, inv.err = fakenodes.SlicesOf(context.Background(), profile, nodes, gpu.DefaultDriverName, pool)
	})
	if inv.err != nil {
		t.Fatal(inv.err)
	}
	return inv.slices
}

// onProfile runs against nodes fake nodes of a profile ("" for none: the
// inputs' slices only).
func onProfile(t testing.TB, profile string, nodes int, o Options) Options {
	t.Helper()
	if profile != "" {
		o.Slices = fakeInventory(t, profile, nodes)
		o.SlicesSource = fmt.Sprintf("profile %s × %d node(s)", profile, nodes)
		o.Republish = republisher(t, profile, fakenodes.Pool{})
	}
	return o
}

// republisher is what fake nodes of the profile publish once claims are
// prepared on them (Options.Republish).
func republisher(t testing.TB, profile string, pool fakenodes.Pool) func(context.Context, string, [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	t.Helper()
	return newRepublisher(t, profile, pool).Slices
}

// newRepublisher is a fakenodes.Republisher removed when the test ends.
func newRepublisher(t testing.TB, profile string, pool fakenodes.Pool) *fakenodes.Republisher {
	t.Helper()
	r, err := fakenodes.NewRepublisher(profile, gpu.DefaultDriverName, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func sliceJSONSpec(t *testing.T, s *resourceapi.ResourceSlice) string {
	t.Helper()
	data, err := json.Marshal(s.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// klogQuiet keeps the plugin's log out of the test output.
func klogQuiet(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.Discard())
}

// onSharedProfile is onProfile on a node pool with shareable GPUs
// (consumable capacity), the pool the sharing examples are for.
func onSharedProfile(t testing.TB, profile string, o Options) Options {
	t.Helper()
	o.Slices = fakePoolInventory(t, profile, 1, fakenodes.Pool{ConsumableCapacity: true})
	o.SlicesSource = fmt.Sprintf("profile %s × 1 node(s), shareable GPUs", profile)
	return o
}
