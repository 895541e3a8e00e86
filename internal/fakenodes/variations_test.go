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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestPublishedVariationsAreMarked: an attribute the slice builder
// publishes whose value differs between the GPUs of one model on two fake
// nodes (two nodes of a profile, two trays of one rack, trays of two
// racks) is in slicebuilder.Variations, and every PerGPU, PerTray and
// PerFabric attribute there does differ where it should. An identity left
// out would make every node a class of its own in gpudra-controller's
// fleet accounting, so its work and memory would grow with the fleet.
// PerMachine attributes (PCI addresses) are alike on fake nodes of one
// profile; they are marked for real machines, whose slots and firmware
// may differ.
func TestPublishedVariationsAreMarked(t *testing.T) {
	const driver = "gpu.gpudra.io"
	ctx := context.Background()
	// tray writes a profile file for a GB200 tray at a place in a rack
	// (trayIndex) of an NVLink domain (cluster and clique) and builds its
	// slices.
	tray := func(t *testing.T, dir string, node int, cluster string, clique, trayIndex int) []*resourceapi.ResourceSlice {
		path := filepath.Join(dir, fmt.Sprintf("tray-%d.yaml", node))
		text := fmt.Sprintf("profile: gb200-tray\nfabric:\n  clusterUUID: %s\n  cliqueID: %d\n  state: COMPLETED\n  health: HEALTHY\n"+
			"platform:\n  chassisSerial: RACK0001\n  slotNumber: %d\n  trayIndex: %d\n  hostID: 1\n", cluster, clique, trayIndex+1, trayIndex)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		sl, err := Node(ctx, path, NodeName(node), driver, dir, Pool{})
		if err != nil {
			t.Fatal(err)
		}
		return sl
	}
	const rackA, rackB = "9f410827-0000-4000-8000-000000000001", "9f410827-0000-4000-8000-000000000002"
	for _, tc := range []struct {
		name string
		// slices are the two nodes' slices (node-1's and node-2's).
		slices func(t *testing.T) []*resourceapi.ResourceSlice
		// mustVary are the kinds whose attributes differ on every device
		// that carries them.
		mustVary []slicebuilder.Variation
	}{
		{name: "dgx-h100", mustVary: []slicebuilder.Variation{slicebuilder.PerGPU}},
		{name: "gb200-tray", mustVary: []slicebuilder.Variation{slicebuilder.PerGPU}},
		{name: "gb200 trays of one rack", mustVary: []slicebuilder.Variation{slicebuilder.PerGPU, slicebuilder.PerTray},
			slices: func(t *testing.T) []*resourceapi.ResourceSlice {
				dir := t.TempDir()
				return append(tray(t, dir, 1, rackA, 32766, 0), tray(t, dir, 2, rackA, 32766, 1)...)
			}},
		{name: "gb200 trays of two racks", mustVary: []slicebuilder.Variation{slicebuilder.PerGPU, slicebuilder.PerFabric},
			slices: func(t *testing.T) []*resourceapi.ResourceSlice {
				dir := t.TempDir()
				return append(tray(t, dir, 1, rackA, 32766, 0), tray(t, dir, 2, rackB, 1, 0)...)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sl []*resourceapi.ResourceSlice
			if tc.slices != nil {
				sl = tc.slices(t)
			} else {
				var err error
				if sl, err = Slices(ctx, tc.name, 2, driver); err != nil {
					t.Fatal(err)
				}
			}
			// Each node's devices, by name.
			nodes := map[string]map[string]resourceapi.Device{}
			for _, s := range sl {
				if s.Spec.NodeName == nil {
					continue // a channel pool: no node's
				}
				n := *s.Spec.NodeName
				if nodes[n] == nil {
					nodes[n] = map[string]resourceapi.Device{}
				}
				for _, d := range s.Spec.Devices {
					nodes[n][d.Name] = d
				}
			}
			a, b := nodes[NodeName(1)], nodes[NodeName(2)]
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("%s publishes %d devices, %s %d: want the same devices, at least one", NodeName(1), len(a), NodeName(2), len(b))
			}
			varied := map[resourceapi.QualifiedName]bool{}
			for name, da := range a {
				db, ok := b[name]
				if !ok {
					t.Errorf("device %s is on %s only", name, NodeName(1))
					continue
				}
				for attr, va := range da.Attributes {
					vb, ok := db.Attributes[attr]
					if !ok {
						t.Errorf("device %s: attribute %s is on %s only", name, attr, NodeName(1))
						continue
					}
					same := equal(va, vb)
					if !same {
						varied[attr] = true
					}
					v, marked := slicebuilder.Variations[attr]
					switch {
					case !same && !marked:
						t.Errorf("device %s: attribute %s is %s on %s and %s on %s, and is not in slicebuilder.Variations: mark it there (an identity left out makes every node a class of its own in the controller's fleet accounting)",
							name, attr, show(va), NodeName(1), show(vb), NodeName(2))
					case same && marked && slices.Contains(tc.mustVary, v):
						t.Errorf("device %s: attribute %s is %s on both nodes, but slicebuilder.Variations says it differs (%d)", name, attr, show(va), v)
					}
				}
			}
			// Every attribute of a kind that must vary here differs on
			// some device: it is published (but parentUUID, which only
			// MIG partitions carry, and the GB200 trays publish none).
			for attr, v := range slicebuilder.Variations {
				if slices.Contains(tc.mustVary, v) && !varied[attr] && attr != slicebuilder.AttrParentUUID {
					t.Errorf("attribute %s (slicebuilder.Variations) differs on no device of the two nodes", attr)
				}
			}
		})
	}
}

func equal(a, b resourceapi.DeviceAttribute) bool { return show(a) == show(b) }

func show(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return fmt.Sprintf("%q", *a.StringValue)
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	case a.VersionValue != nil:
		return "version " + *a.VersionValue
	}
	return "empty"
}
