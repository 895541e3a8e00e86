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

package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// strategyMention is how code and the chart name one sharing strategy,
// time-slicing, by identifier or as a listed value: a file that lists
// the strategies has one, and a new strategy must be added there too.
var strategyMention = regexp.MustCompile(`TimeSlicingStrategy|SharingTimeSlicing|IsTimeSlicing\(|timeSlicingStrategy|'TimeSlicing'|"TimeSlicing"`)

// TestSharingRecipeNamesEveryFile: the recipe "Add a sharing strategy"
// names every file that lists the sharing strategies (outside tests,
// test data and generated code), so that a file which starts to list them
// joins the recipe; TestRecipeFilesExist checks that the files it names
// exist. The recipe's own test, TestEveryStrategyIsComplete
// (internal/nodestate), fails for a strategy one of its steps misses.
func TestSharingRecipeNamesEveryFile(t *testing.T) {
	data, err := os.ReadFile(development)
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(data), "\n### Add a sharing strategy\n")
	if !ok {
		t.Fatalf("%s has no recipe \"### Add a sharing strategy\"", development)
	}
	recipe, _, _ = strings.Cut(recipe, "\n#")
	named := map[string]bool{}
	for _, word := range quoted(recipe) {
		named[word] = true
	}

	var listing []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
		if d.IsDir() {
			if slices.Contains([]string{".git", "testdata", "golden", "docs", "e2e", "hack", "vendor"}, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(rel)
		if !slices.Contains([]string{".go", ".yaml", ".json"}, ext) || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strategyMention.Match(b) {
			listing = append(listing, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(listing) < 8 {
		t.Fatalf("only %d files list the sharing strategies (%v): is the check still finding them?", len(listing), listing)
	}
	for _, path := range listing {
		if !named[path] {
			t.Errorf("%s lists the sharing strategies, and the recipe \"Add a sharing strategy\" in %s does not name it", path, development)
		}
	}
}
