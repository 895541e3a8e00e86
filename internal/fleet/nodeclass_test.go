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

package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestNodesOfOneProfileAreOneClass: two fresh nodes of one built-in
// profile publish the same devices but for their identities (UUIDs, PCI
// addresses, a tray's index in its rack), so the accounting puts them in
// one class and gives their slices one shape. An attribute that differs
// between such nodes and is not among slicebuilder.IdentityAttributes
// would make every node a class and a shape of its own: the controller's
// work and memory would then grow with the fleet. Each slice also comes
// back whole from its compact form.
func TestNodesOfOneProfileAreOneClass(t *testing.T) {
	profiles := map[string]func(t *testing.T) []*resourceapi.ResourceSlice{}
	for _, profile := range nvmlfake.Profiles() {
		profiles[profile] = func(t *testing.T) []*resourceapi.ResourceSlice {
			sl, err := fakenodes.Slices(context.Background(), profile, 2, driver)
			if err != nil {
				t.Fatal(err)
			}
			return sl
		}
	}
	// Two trays of one GB200 rack: one NVLink domain, their own places in
	// the rack (docs/fake-gpus.md, profile files).
	profiles["gb200 trays of one rack"] = func(t *testing.T) []*resourceapi.ResourceSlice {
		dir := t.TempDir()
		var out []*resourceapi.ResourceSlice
		for i := range 2 {
			path := filepath.Join(dir, fmt.Sprintf("tray-%d.yaml", i))
			text := fmt.Sprintf("profile: gb200-tray\nfabric:\n  clusterUUID: 9f410827-0000-4000-8000-000000000001\n  cliqueID: 32766\n  state: COMPLETED\n  health: HEALTHY\n"+
				"platform:\n  chassisSerial: RACK0001\n  slotNumber: %d\n  trayIndex: %d\n  hostID: 1\n", i+1, i)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			sl, err := fakenodes.Node(context.Background(), path, fakenodes.NodeName(i+1), driver, dir, fakenodes.Pool{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sl...)
		}
		return out
	}
	for profile, slicesOf := range profiles {
		t.Run(profile, func(t *testing.T) {
			sl := slicesOf(t)
			c := &Compactor{}
			var compact []*CompactSlice
			shapes := map[string]map[*shape]bool{}
			for _, s := range sl {
				cs := c.Compact(s)
				if got := cs.Full(); !equality.Semantic.DeepEqual(got.Spec, s.Spec) {
					t.Errorf("slice %s does not come back whole from its compact form", s.Name)
				}
				if cs.NodeName == "" {
					continue // a channel pool: no node's
				}
				compact = append(compact, cs)
				if shapes[cs.NodeName] == nil {
					shapes[cs.NodeName] = map[*shape]bool{}
				}
				shapes[cs.NodeName][cs.shape] = true
			}
			a, b := fakenodes.NodeName(1), fakenodes.NodeName(2)
			classes := nodeClasses([]string{a, b}, compact, nil)
			if classes[a] != classes[b] {
				t.Errorf("%s and %s are two classes: an attribute that differs between them is not an identity (slicebuilder.IdentityAttributes)", a, b)
			}
			for sh := range shapes[a] {
				if !shapes[b][sh] {
					t.Errorf("a slice of %s has a shape no slice of %s shares", a, b)
				}
			}
		})
	}
}
