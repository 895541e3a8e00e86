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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMarkdownTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Doc\n\n## Other\n\n| x |\n| --- |\n| no |\n\n## Flags\n\nSome text.\n\n| flag | meaning |\n| --- | --- |\n| `--a` (`A`) | one |\n| `--b`, `--c` | two \\| three |\n\nAfter.\n\n| y |\n| --- |\n| later |\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := MarkdownTable(t, path, "## Flags")
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join(r, "|"))
	}
	if strings.Join(got, "\n") != "`--a` (`A`)|one\n`--b`, `--c`|two \\| three" {
		t.Errorf("rows %q", got)
	}
}
