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
	"bytes"
	"path/filepath"
	"sort"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// profileFiles are the golden profiles that are files under
// testdata/profiles, not built in.
var profileFiles = map[string]string{"dgx-a100-mig": filepath.Join("testdata", "profiles", "dgx-a100-mig.yaml")}

// goldenProfiles are every built-in fake profile and the profileFiles (by
// base name); each has a golden file, which -update creates for a new one.
func goldenProfiles() []string {
	out := nvmlfake.Profiles()
	for name := range profileFiles {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestGoldenSlices pins, for each fake profile, the exact ResourceSlices the
// plugin publishes (their specs, in slice order). A change to attributes,
// names, capacities or layout shows up as a diff here; rerun with -update
// after checking it is intended, and update the docs with it.
func TestGoldenSlices(t *testing.T) {
	gpudratest.NoStaleGoldens(t, filepath.Join("testdata", "slices"), ".yaml", goldenProfiles())
	for _, profile := range goldenProfiles() {
		t.Run(profile, func(t *testing.T) {
			source := profile
			if file, ok := profileFiles[profile]; ok {
				source = file
			}
			ctx, c := startCluster(t, source)
			slices, err := c.Slices(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gpudratest.GoldenFile(t, filepath.Join("testdata", "slices", profile+".yaml"), renderSlices(t, slices))
		})
	}
}

// renderSlices keeps what a user and the scheduler see of each slice (its
// spec), ordered by name, which is the allocator's order.
func renderSlices(t *testing.T, slices []*resourceapi.ResourceSlice) []byte {
	t.Helper()
	sorted := append([]*resourceapi.ResourceSlice(nil), slices...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j].Name < sorted[i].Name {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	var buf bytes.Buffer
	for _, s := range sorted {
		out, err := yaml.Marshal(map[string]any{"spec": s.Spec})
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(out)
	}
	return buf.Bytes()
}
