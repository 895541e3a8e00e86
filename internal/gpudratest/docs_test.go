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

	"github.com/spf13/pflag"
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

// TestFlagTable: every visible flag gets a row with its shorthand, its
// variable in its own column, its type and default; help texts are safe
// in a cell; hidden and deprecated flags are left out.
func TestFlagTable(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("dir", "/var/run/cdi", "Where <specs> go | or not (env DIR).")
	fs.BoolP("all", "A", false, "Every namespace.\nSecond line.")
	fs.Duration("wait", 0, "How long.")
	fs.String("old", "", "Gone.")
	_ = fs.MarkDeprecated("old", "use --dir")
	fs.String("secret", "", "Hidden.")
	_ = fs.MarkHidden("secret")
	got := FlagTable(fs, func(f string) string {
		if f == "dir" {
			return "DIR"
		}
		return ""
	})
	want := "| flag | environment | type | default | meaning |\n| --- | --- | --- | --- | --- |\n" +
		"| `-A`, `--all` |  | bool | `false` | Every namespace.<br>Second line. |\n" +
		"| `--dir` | `DIR` | string | `/var/run/cdi` | Where &lt;specs&gt; go \\| or not. |\n" +
		"| `--wait` |  | duration | `0s` | How long. |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
