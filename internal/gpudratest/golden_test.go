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
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoldenTestsExist: every test hack/golden-tests lists is a test
// function of its package; a renamed or deleted one would leave make
// golden running nothing.
func TestGoldenTestsExist(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tests, err := GoldenTests()
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatalf("%s lists no golden test", GoldenTestsFile)
	}
	for pkg, names := range tests {
		src := testSources(t, filepath.Join(root, pkg))
		for _, name := range names {
			if !regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(t \*testing\.T\)`).MatchString(src) {
				t.Errorf("%s lists %s for ./%s, which has no such test", GoldenTestsFile, name, pkg)
			}
		}
	}
}

// TestOneUpdateFlag: no package defines an -update flag of its own; golden
// tests use this package's, which checks they are in make golden.
func TestOneUpdateFlag(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	own, _ := filepath.Abs(".")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == own {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), `flag.Bool("update"`) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s defines its own -update flag: use gpudratest.GoldenFile or GoldenRewrite", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testSources is the text of a directory's _test.go files.
func testSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no test files (%v)", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
