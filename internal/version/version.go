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

// Package version is the version gpudra's binaries were built from. The
// build stamps it (hack/version.sh ldflags, used by make build, make image,
// the Dockerfile and the e2e image):
//
//	go build -ldflags "$(hack/version.sh ldflags)" ./cmd/...
//
// which is
//
//	go build -ldflags "-X github.com/gpudra/gpudra/internal/version.version=0.1.0 \
//	    -X github.com/gpudra/gpudra/internal/version.revision=$(git rev-parse HEAD)" ./cmd/...
//
// An unstamped build (go run, go test) falls back to what the Go toolchain
// recorded in the binary: the module's version and the VCS revision, when
// it knows them.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped with -ldflags -X; see the package comment.
var (
	version  = ""
	revision = ""
)

// Unknown is what Version and Revision say when neither the build nor the
// Go toolchain recorded them.
const Unknown = "unknown"

// Info is what a binary knows about its build: `--version`, `gpudra
// version` and the gpudra_build_info metric show it.
type Info struct {
	// Version is gpudra's version from git describe (hack/version.sh):
	// a release, e.g. 0.1.0, or a development build after it, e.g.
	// 0.1.0-3-g0123456789ab.
	Version string `json:"version"`
	// Revision is the git commit the binary was built from, with
	// "-dirty" when the tree had uncommitted changes.
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's build information.
func Get() Info {
	return get(version, revision, readBuildInfo)
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

func get(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Revision: rev, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info.Version == "" || info.Revision == "" {
		if bi, ok := read(); ok {
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			if info.Revision == "" {
				info.Revision = vcsRevision(bi)
			}
		}
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Revision == "" {
		info.Revision = Unknown
	}
	return info
}

// vcsRevision is the commit the Go toolchain stamped (go build in a git
// checkout with -buildvcs, the default), "-dirty" when modified.
func vcsRevision(bi *debug.BuildInfo) string {
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" && modified {
		rev += "-dirty"
	}
	return rev
}

// String is the one line --version prints after the binary's name, e.g.
// "0.1.0 (revision 3f2c…, go1.26.8, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}
