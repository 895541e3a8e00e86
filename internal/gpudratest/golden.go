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

package gpudratest

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update is the one -update flag of every package with golden tests.
var update = flag.Bool("update", false, "rewrite the golden files from the current code instead of comparing with them (make golden)")

// GoldenTestsFile lists, by package, every test that compares with golden
// files, relative to the module root: make golden runs each with -update,
// make verify without.
const GoldenTestsFile = "hack/golden-tests"

// Updating reports whether this run rewrites golden files (-update).
func Updating() bool { return *update }

// GoldenFile compares got with the golden file at path, or with -update
// writes it (and its directory). A difference fails the test with a diff,
// and the command that rewrites the file.
func GoldenFile(t testing.TB, path string, got []byte) {
	t.Helper()
	checkListed(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("golden file %s does not exist: %s, and review it", path, rerun(t))
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is out of date (-want +got):\n%s\nIf the change is intended: %s, and review the diff.", path, cmp.Diff(string(want), string(got)), rerun(t))
	}
}

// GoldenRewrite keeps a file that is partly generated up to date: gen
// returns what the file should hold, given what it holds now (for example
// with one section replaced, see ReplaceSection). With -update the file is
// rewritten; otherwise a difference fails the test with a diff.
func GoldenRewrite(t testing.TB, path string, gen func(current []byte) []byte) {
	t.Helper()
	current, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	GoldenFile(t, path, gen(current))
}

// ReplaceSection returns doc with the text between the lines begin and end
// (both kept) replaced by body; it fails the test when doc lacks them.
func ReplaceSection(t testing.TB, doc []byte, begin, end string, body []byte) []byte {
	t.Helper()
	b := bytes.Index(doc, []byte(begin))
	if b < 0 {
		t.Fatalf("no generated section: %q is missing", begin)
	}
	e := bytes.Index(doc[b:], []byte(end))
	if e < 0 {
		t.Fatalf("the generated section %q has no end %q", begin, end)
	}
	return slices.Concat(doc[:b+len(begin)], body, doc[b+e:])
}

// NoStaleGoldens fails for each file in dir with the extension ext whose
// base name is not in names: a golden file of a case that is gone would be
// kept, unchecked, forever.
func NoStaleGoldens(t testing.TB, dir, ext string, names []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ext); !slices.Contains(names, name) {
			t.Errorf("%s is the golden file of %q, which is no case any more: delete it", f, name)
		}
	}
}

// rerun is the command that rewrites the calling test's golden files.
func rerun(t testing.TB) string {
	pkg, _ := packageDir()
	return fmt.Sprintf("run make golden (or go test ./%s -run '^%s$' -update)", pkg, rootTest(t))
}

// rootTest is the top-level test of t ("TestX" of "TestX/case").
func rootTest(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// checkListed fails the test when it is missing from GoldenTestsFile: make
// golden would then leave its files as they are.
func checkListed(t testing.TB) {
	t.Helper()
	pkg, err := packageDir()
	if err != nil {
		t.Fatal(err)
	}
	tests, err := GoldenTests()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tests[pkg], rootTest(t)) {
		t.Fatalf("%s compares with golden files but is not listed for ./%s in %s, so make golden would not rewrite them: add it there", rootTest(t), pkg, GoldenTestsFile)
	}
}

var goldenTests = sync.OnceValues(func() (map[string][]string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	return ReadGoldenTests(filepath.Join(root, GoldenTestsFile))
})

// GoldenTests are the golden tests of GoldenTestsFile by package directory
// (relative to the module root, e.g. "internal/simulate").
func GoldenTests() (map[string][]string, error) { return goldenTests() }

// ReadGoldenTests parses a golden test list: one line per package, the
// directory ("./internal/simulate") and its golden tests; # starts a comment.
func ReadGoldenTests(path string) (map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 || !strings.HasPrefix(fields[0], "./") {
			return nil, fmt.Errorf("%s:%d: want ./<package dir> and its golden tests, got %q", path, n, sc.Text())
		}
		pkg := filepath.ToSlash(filepath.Clean(fields[0]))
		out[pkg] = append(out[pkg], fields[1:]...)
	}
	return out, sc.Err()
}

// ModuleRoot is the directory of the go.mod above the working directory
// (go test runs a package's tests in its directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// packageDir is the running test's package directory relative to the
// module root.
func packageDir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, wd)
	return filepath.ToSlash(rel), err
}
