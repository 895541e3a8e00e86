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

package backend

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// documentedHooks reads the hooks docs/security.md lists in its table of
// the CDI hooks the specs use.
func documentedHooks(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## CDI hooks in the specs")
	if !ok {
		t.Fatal(`docs/security.md has no section "## CDI hooks in the specs"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `nvidia-cdi-hook ([a-z-]+)` \\|").FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("docs/security.md lists no hook")
	}
	return out
}

// TestSpecHooksAreDocumented: the hooks are the one part of a CDI spec the
// container runtime runs on the host, as root. Every hook any spec of any
// fake profile names (for every set of driver capabilities and every
// device) is a createContainer hook of gpudra's nvidia-cdi-hook with a
// subcommand docs/security.md lists, and an environment of its own with
// nothing but NVIDIA_CTK_DEBUG; every hook the page lists is used; and the
// container toolkit built into gpudra is one that fixed CVE-2025-23266 and
// CVE-2025-23267 (v1.17.8 or later).
func TestSpecHooksAreDocumented(t *testing.T) {
	documented := documentedHooks(t)
	used := map[string]bool{}
	for _, profile := range nvmlfake.Profiles() {
		be := openFakeBackend(t, profile, t.TempDir())
		node, err := be.Discover(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, caps := range append(capabilitySets, []string{"compute", "utility", "video", "graphics", "display", "compat32"}) {
			edits := be.CommonEdits(caps)
			for _, g := range node.GPUs {
				edits = edits.Append(be.DeviceEdits(g))
			}
			for _, h := range edits.Hooks {
				where := profile + "/" + strings.Join(caps, ",")
				if h.Name != "createContainer" || h.Path != DefaultCDIHookPath || len(h.Args) < 2 || h.Args[0] != "nvidia-cdi-hook" {
					t.Errorf("%s: hook %s %s %v: want a createContainer hook of %s", where, h.Name, h.Path, h.Args, DefaultCDIHookPath)
					continue
				}
				sub := h.Args[1]
				used[sub] = true
				if !slices.Contains(documented, sub) {
					t.Errorf("%s: the specs name hook nvidia-cdi-hook %s, which docs/security.md does not list: document what it does and why it is safe, then add it to the table", where, sub)
				}
				for _, e := range h.Env {
					if !strings.HasPrefix(e, "NVIDIA_CTK_DEBUG=") {
						t.Errorf("%s: hook %s has environment %q; docs/security.md says hooks carry NVIDIA_CTK_DEBUG only", where, sub, e)
					}
				}
				if len(h.Env) == 0 {
					t.Errorf("%s: hook %s has no environment of its own", where, sub)
				}
			}
		}
	}
	for _, sub := range documented {
		if !used[sub] {
			t.Errorf("docs/security.md lists hook nvidia-cdi-hook %s, which no spec names any more", sub)
		}
	}

	// go.mod pins the version every gpudra binary, and the image's
	// nvidia-cdi-hook (a tool of the module), is built with.
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/NVIDIA/nvidia-container-toolkit v(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod does not require github.com/NVIDIA/nvidia-container-toolkit")
	}
	v, err := version.ParseSemantic(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if v.LessThan(version.MustParseSemantic("1.17.8")) {
		t.Errorf("container toolkit v%s is older than v1.17.8, which fixed CVE-2025-23266 and CVE-2025-23267", v)
	}
}
