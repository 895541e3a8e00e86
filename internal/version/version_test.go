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

package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := func(rev, modified string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
			}}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name              string
		version, revision string
		read              func() (*debug.BuildInfo, bool)
		want              Info
	}{
		{name: "stamped", version: "0.1.0", revision: "abc", read: vcs("def", "true"), want: Info{Version: "0.1.0", Revision: "abc"}},
		{name: "toolchain revision", version: "0.1.0", read: vcs("def", "false"), want: Info{Version: "0.1.0", Revision: "def"}},
		{name: "dirty tree", read: vcs("def", "true"), want: Info{Version: Unknown, Revision: "def-dirty"}},
		{name: "module version", read: func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, true
		}, want: Info{Version: "v0.2.0", Revision: Unknown}},
		{name: "nothing known", read: none, want: Info{Version: Unknown, Revision: Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.version, tc.revision, tc.read)
			if got.Version != tc.want.Version || got.Revision != tc.want.Revision {
				t.Errorf("got version %q revision %q, want %q %q", got.Version, got.Revision, tc.want.Version, tc.want.Revision)
			}
			if !strings.HasPrefix(got.GoVersion, "go") || !strings.Contains(got.Platform, "/") {
				t.Errorf("Go version %q, platform %q", got.GoVersion, got.Platform)
			}
			if s := got.String(); !strings.HasPrefix(s, tc.want.Version+" (revision "+tc.want.Revision) {
				t.Errorf("String() = %q", s)
			}
		})
	}
}
