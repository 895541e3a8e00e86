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

package cdispec

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

// withFileSizeLimit runs fn while no file of this process may grow past
// limit bytes: a write beyond it fails with EFBIG, the way a full disk
// fails one with ENOSPC, after the file was created and partly written.
// (Go ignores the SIGXFSZ that comes with it.)
func withFileSizeLimit(t *testing.T, limit uint64, fn func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	fn()
}

// dirEntries lists a directory's entries, hidden ones included.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestFailedWriteLeavesNothingBehind: a spec write that fails half-way (a
// full disk) leaves neither a temporary file nor a half-written spec in the
// directory the container runtime reads, and the spec that was there
// before is intact. (Before, the CDI library's spec.*.tmp stayed, and
// nothing ever removed it: start-up lists only .yaml and .json files.)
func TestFailedWriteLeavesNothingBehind(t *testing.T) {
	w, err := New(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteClaimSpec(uidA, gpu.Edits{}, []Device{gpuDevice("0")}); err != nil {
		t.Fatal(err)
	}
	before := dirEntries(t, w.Dir())
	spec, err := os.ReadFile(filepath.Join(w.Dir(), w.specName(uidA)+specExt))
	if err != nil {
		t.Fatal(err)
	}

	withFileSizeLimit(t, 16, func() {
		// A rewrite of the same claim, and a new one.
		for _, uid := range []string{uidA, uidB} {
			if err := w.WriteClaimSpec(uid, gpu.Edits{Env: []string{"A=1"}}, []Device{gpuDevice("1")}); err == nil {
				t.Fatalf("write of claim %s succeeded past the file size limit", uid)
			}
		}
	})

	if got := dirEntries(t, w.Dir()); !equalStrings(got, before) {
		t.Errorf("directory after failed writes = %v, want as before: %v", got, before)
	}
	if got, err := os.ReadFile(filepath.Join(w.Dir(), w.specName(uidA)+specExt)); err != nil || !bytes.Equal(got, spec) {
		t.Errorf("the earlier spec changed after a failed rewrite: %v\n%s", err, got)
	}
	// And the next write, with room again, works.
	if err := w.WriteClaimSpec(uidB, gpu.Edits{}, []Device{gpuDevice("1")}); err != nil {
		t.Fatalf("write after the failures: %v", err)
	}
}

// TestNewRemovesStaleStaging: a plugin killed in the middle of a write
// leaves its staging directory; the next start removes it at once, young
// as it is, and leaves alone the write in flight of another plugin pod
// (which holds its staging directory locked) and other drivers' staging.
// (Before, only a staging directory older than a minute was removed, so
// a crash-looping plugin left one behind at every start.)
func TestNewRemovesStaleStaging(t *testing.T) {
	dir := t.TempDir()
	w, err := New(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	stage := func(w *Writer, name string) string {
		path := filepath.Join(dir, w.stagingPrefix()+name)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "spec.456.tmp"), []byte("---\ncdiVersion"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	stale := stage(w, "123")
	// A write in flight, e.g. by the old plugin pod of a rolling update:
	// its writer holds the lock.
	inFlight := stage(w, "456")
	f, err := os.Open(inFlight)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Another driver's.
	other, err := New(dir, "gpu.example.com")
	if err != nil {
		t.Fatal(err)
	}
	othersStale := stage(other, "789")

	if _, err := New(dir, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the staging directory of a killed write is still there: %v", err)
	}
	for _, keep := range []string{inFlight, othersStale} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
