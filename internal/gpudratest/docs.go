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
	"strings"
	"testing"
)

// MarkdownTable returns the body rows of the first table under the heading
// (a line such as "## `gpudra-controller` flags") in a Markdown file, each
// row as its trimmed cells. It fails the test when there is none.
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
		case line == heading:
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
