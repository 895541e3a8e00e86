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
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestHealthSurvivesRestart: after an XID the driver still asks for a
// recovery action until the GPU is reset (XID 48) or the node rebooted
// (XID 79: the GPU fell off the bus, and NVML answers ERROR_GPU_IS_LOST
// for it from then on). A plugin restart in between must not publish the
// GPU as fit: from its first publish on, the GPU is tainted (or, lost, not
// published at all) and unhealthy to the kubelet, until the reset.
func TestHealthSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		xid  uint64
		lost bool
	}{
		{name: "XID 48 needs a GPU reset", xid: 48},
		{name: "XID 79 lost the GPU", xid: 79, lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ctx := ktesting.NewTestContext(t)
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: "dgx-a100", HealthRecheck: 100 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sick := c.Driver.Node().GPUs[2]
			// The watch may not be registered yet: an XID before it is
			// not delivered, like NVML's. Inject until it is seen.
			waitFor(t, "the taint", func() bool {
				if err := nvmlfake.InjectXID(c.Opts.FakeStateDir(), sick.UUID, tc.xid); err != nil {
					t.Fatal(err)
				}
				return slices.Equal(taintedDevices(ctx, t, c), []string{sick.DeviceName()})
			})

			c.Stop()
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			// From its first publish on, the new plugin says so: the
			// slices the old one left are tainted too, so watch them for
			// longer than the new plugin takes to rewrite them.
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				_, published := devicesOf(mustSlices(t, c))[sick.DeviceName()]
				tainted := slices.Equal(taintedDevices(ctx, t, c), []string{sick.DeviceName()})
				if published && !tainted {
					t.Fatalf("after a restart %s is published untainted, although the driver still asks for a recovery action", sick.DeviceName())
				}
				if !published && !tc.lost {
					t.Fatalf("after a restart %s is not published", sick.DeviceName())
				}
			}
			if tc.lost {
				return
			}
			reports := watchHealthStream(ctx, t, c)
			waitForHealth(t, reports, sick.DeviceName(), kubeletplugin.HealthStatusUnhealthy)

			if err := nvmlfake.ResetGPU(c.Opts.FakeStateDir(), sick.UUID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the taint to go after the reset", func() bool { return len(taintedDevices(ctx, t, c)) == 0 })
			waitForHealth(t, reports, sick.DeviceName(), kubeletplugin.HealthStatusHealthy)
		})
	}
}

func mustSlices(t *testing.T, c *Cluster) []*resourceapi.ResourceSlice {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	s, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
