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

package fakenodes

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestNodeOfReadsBackWhatIsPublished: on every profile, the node that
// slicebuilder.NodeOf reads back from the published slices resolves
// every published device name as the plugin's own node does (whole GPU,
// MIG placement, monitoring device), to the same GPU UUID, memory,
// multiprocessors and placement: what gpudra check hands to the
// prepare-time checks is what the plugin decides on.
func TestNodeOfReadsBackWhatIsPublished(t *testing.T) {
	for _, profile := range nvmlfake.Profiles() {
		t.Run(profile, func(t *testing.T) {
			var node gpu.Node
			var devices []resourceapi.Device
			err := WithNode(context.Background(), profile, "node-1", t.TempDir(), func(n gpu.Node, sysfsRoot string) error {
				node = n
				res, err := slicebuilder.Build(n, slicebuilder.Options{DriverName: gpu.DefaultDriverName, SysfsRoot: sysfsRoot})
				for _, s := range res.Pools[n.Name].Slices {
					devices = append(devices, s.Devices...)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			back := slicebuilder.NodeOf(node.Name, devices)
			if back.Name != node.Name {
				t.Errorf("pool %q, want %q", back.Name, node.Name)
			}
			for _, d := range devices {
				switch {
				case resolves(node.GPUByDeviceName, d.Name):
					want, _ := node.GPUByDeviceName(d.Name)
					got, ok := back.GPUByDeviceName(d.Name)
					if !ok || got.UUID != want.UUID || got.MemoryBytes != want.MemoryBytes || got.Multiprocessors != want.Multiprocessors {
						t.Errorf("%s: read back as %+v (ok %v), want UUID %s, %d bytes, %d SMs", d.Name, got, ok, want.UUID, want.MemoryBytes, want.Multiprocessors)
					}
				case resolves(node.GPUByMonitorName, d.Name):
					want, _ := node.GPUByMonitorName(d.Name)
					if got, ok := back.GPUByMonitorName(d.Name); !ok || got.UUID != want.UUID {
						t.Errorf("%s: monitors %s (ok %v), want %s", d.Name, got.UUID, ok, want.UUID)
					}
				default:
					want, ok := node.MigDeviceByName(d.Name)
					if !ok {
						t.Fatalf("%s: the plugin's node does not resolve a device it publishes", d.Name)
					}
					got, ok := back.MigDeviceByName(d.Name)
					if !ok || got.Parent.UUID != want.Parent.UUID || got.Placement != want.Placement || got.Profile.Name != want.Profile.Name {
						t.Errorf("%s: read back as %s %+v on %s (ok %v), want %s %+v on %s", d.Name, got.Profile.Name, got.Placement, got.Parent.UUID, ok,
							want.Profile.Name, want.Placement, want.Parent.UUID)
					}
				}
			}
		})
	}
}

func resolves(lookup func(string) (gpu.GPU, bool), name string) bool {
	_, ok := lookup(name)
	return ok
}
