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
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gpudra/gpudra/internal/cmdline"
)

// MarkdownTable returns the body rows of the first table under the heading
// (a line that starts with heading, such as "## `gpudra-controller` flags")
// in a Markdown file, each row as its trimmed cells. It fails the test when
// there is none.
func MarkdownTable(t testing.TB, path, heading string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in, table := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, heading):
			in = true
		case !in:
		case strings.HasPrefix(line, "|"):
			table = true
			cells := splitRow(line)
			if !strings.HasPrefix(cells[0], "---") {
				rows = append(rows, cells)
			}
		case table || strings.HasPrefix(line, "#"):
			in = false
		}
		if !in && table {
			break
		}
	}
	if len(rows) < 2 {
		t.Fatalf("%s: no table under %q", path, heading)
	}
	return rows[1:] // without the header row
}

// splitRow splits a table row into its trimmed cells; "\\|" is a pipe
// inside a cell.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteString("\\|")
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// flagCellRe finds, in order, the flags of a table cell ("`--a`") and
// the parenthesized environment variables that follow them ("(`A`)").
var flagCellRe = regexp.MustCompile("`(--?[a-z0-9-]+)`|\\(([^)]*)\\)")

var envRe = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")

// CheckFlagTable compares a binary's flags with their table in the docs:
// each row's first cell names flags ("`--a`, `--b`") and, in parentheses,
// the environment variables that set them, in the same order. Every flag
// of the binary is in the table with its variable, except the logging
// flags every binary has (component-base documents those); every flag
// the table names exists.
func CheckFlagTable(t testing.TB, cmd *cmdline.Command, path, heading string) {
	t.Helper()
	common := cmdline.New("common").Flags
	documented := map[string]string{} // flag → variable ("" for none)
	for _, row := range MarkdownTable(t, path, heading) {
		// "`--a`, `--b` (`A`, `B`)" or "`--a` (`A`), `--b` (`B`)": the
		// variables in parentheses go with the flags before them.
		var pending []string
		for _, m := range flagCellRe.FindAllStringSubmatch(row[0], -1) {
			if m[1] != "" {
				name := strings.TrimLeft(m[1], "-")
				if cmd.Flags.Lookup(name) == nil {
					t.Errorf("%s documents %s, which %s does not have", path, m[1], cmd.Name)
				}
				documented[name] = ""
				pending = append(pending, name)
				continue
			}
			envs := envRe.FindAllStringSubmatch(m[2], -1)
			if len(envs) != len(pending) {
				t.Errorf("%s: in the row %q, %d flags come before %d variables", path, row[0], len(pending), len(envs))
				continue
			}
			for i, e := range envs {
				documented[pending[i]] = e[1]
			}
			pending = nil
		}
	}
	var missing []string
	cmd.Flags.VisitAll(func(f *pflag.Flag) {
		env, ok := documented[f.Name]
		switch {
		case !ok && common.Lookup(f.Name) == nil:
			missing = append(missing, "--"+f.Name)
		case ok && env != cmd.EnvOf(f.Name):
			t.Errorf("%s: --%s is documented with the variable %q, but %s reads %q", path, f.Name, env, cmd.Name, cmd.EnvOf(f.Name))
		}
	})
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s: the table under %q lacks %s's flags %s", path, heading, cmd.Name, strings.Join(missing, ", "))
	}
}
