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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestMigClaimOfVanishedGPU: a MIG claim whose parent GPU is gone by the
// time the plugin restarts (fallen off the bus, or taken out of the node)
// can still be unprepared: the instance went with its GPU. (Before, every
// retry failed with "get handle: ERROR_NOT_FOUND" or ERROR_GPU_IS_LOST and
// the claim stayed UnprepareStarted for good.)
func TestMigClaimOfVanishedGPU(t *testing.T) {
	tests := []struct {
		name   string
		vanish func(t *testing.T, c *Cluster, uuid string)
	}{
		{
			name: "fallen off the bus",
			vanish: func(t *testing.T, c *Cluster, uuid string) {
				if err := nvmlfake.LoseGPU(c.Opts.FakeStateDir(), uuid); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "taken out of the node",
			vanish: func(t *testing.T, c *Cluster, _ string) {
				// The same node with its last GPU gone.
				var gpus []string
				for range 7 {
					gpus = append(gpus, "- model: h100-sxm5-80gb\n  nvlinkIsland: 0\n")
				}
				path := filepath.Join(c.Opts.Dir, "seven-gpus.yaml")
				if err := os.WriteFile(path, []byte("gpus:\n"+strings.Join(gpus, "")), 0o644); err != nil {
					t.Fatal(err)
				}
				c.Opts.Profile = path
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			applyClasses(ctx, t, c)
			parent := c.Driver.Node().GPUs[7].UUID
			claim := migClaim("on-gpu-7", false, "1g.10gb")
			claim.Spec.Devices.Requests[0].Exactly.Selectors = append(claim.Spec.Devices.Requests[0].Exactly.Selectors,
				celSelector(fmt.Sprintf("device.attributes['gpu.gpudra.io'].parentUUID == %q", parent)))
			res, err := runClaim(ctx, t, c, claim)
			if err != nil {
				t.Fatal(err)
			}
			prepared := res.Claims[0].Claim

			c.Stop()
			tc.vanish(t, c, parent)
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatalf("plugin restart with GPU 7 gone: %v", err)
			}
			defer c.Stop()
			if n := len(c.Driver.Node().GPUs); n != 7 {
				t.Errorf("%d GPUs discovered after GPU 7 vanished, want 7", n)
			}

			resp, err := c.NodeUnprepareResources(ctx, prepared)
			if err != nil {
				t.Fatal(err)
			}
			if msg := resp.Claims[string(prepared.UID)].GetError(); msg != "" {
				t.Fatalf("unprepare of a MIG claim whose GPU vanished: %s", msg)
			}
			assertNothingPrepared(t, c)
		})
	}
}

func celSelector(expr string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}
}
