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

package migrate

import (
	"bytes"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gpudra/gpudra/internal/textsafe"
)

// write returns a changed document's new text. Renamed scalars are
// rewritten in the text itself, so that everything else (comments, JSON
// layout, line breaks in expressions) stays as written; the result is
// parsed again and must equal the rewritten node tree. Where that is not
// possible (an item dropped from a List, a scalar written in a way the
// text edit does not recognise) the tree is encoded instead, in the
// document's indentation style.
func (m *migrator) write(text []byte, root *yaml.Node) ([]byte, error) {
	if !m.restructured {
		if out, ok := m.editText(text, root); ok {
			return out, nil
		}
	}
	m.encoded = true
	return m.encode(text, root)
}

// annotatePrefix starts the comment migrate writes above what has no
// equivalent.
const annotatePrefix = "# gpudra migrate: no equivalent: "

// annotate writes a comment for each thing without an equivalent: above
// its line when the text kept its lines, or at the top of a document
// written anew. A comment already there (a second migration) is not
// written again.
func (m *migrator) annotate(text []byte, encoded bool) []byte {
	lines := strings.SplitAfter(string(text), "\n")
	byLine := map[int][]string{}
	var top []string
	for _, n := range m.notes {
		if n.Kind != NoEquivalent {
			continue
		}
		// One line, whatever the input's fields and values hold: a
		// newline would end the comment and inject YAML.
		c := annotatePrefix + textsafe.Line(n.Message)
		if n.Field != "" {
			c = annotatePrefix + textsafe.Line(n.Field+": "+n.Message)
		}
		if l := n.Line - m.lineOffset - 1; !encoded && l >= 0 && l < len(lines) {
			byLine[l] = append(byLine[l], c)
		} else {
			top = append(top, c)
		}
	}
	has := func(at int, c string) bool {
		for i := at - 1; i >= 0 && strings.HasPrefix(strings.TrimSpace(lines[i]), annotatePrefix); i-- {
			if strings.TrimSpace(lines[i]) == c {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for _, c := range top {
		if !strings.Contains(string(text), c+"\n") {
			b.WriteString(c + "\n")
		}
	}
	for i, l := range lines {
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		if strings.HasPrefix(strings.TrimLeft(l, " "), "- ") {
			indent += "  "
		}
		for _, c := range byLine[i] {
			if !has(i, c) {
				b.WriteString(indent + c + "\n")
			}
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// editText applies m.edits to the text at the scalars' positions.
func (m *migrator) editText(text []byte, root *yaml.Node) ([]byte, bool) {
	idx := newTextIndex(text, root)
	var changes []textChange
	for _, e := range m.edits {
		start, ok := idx.offset(e.node)
		if !ok {
			return nil, false
		}
		end := idx.end(start)
		region := string(text[start:end])
		if e.cel {
			out, _, _ := rewriteCEL(region, m.opts.DriverName)
			changes = append(changes, textChange{start, end, out})
			continue
		}
		var q string
		switch e.node.Style {
		case 0:
		case yaml.DoubleQuotedStyle:
			q = `"`
		case yaml.SingleQuotedStyle:
			q = `'`
		default:
			return nil, false
		}
		if !strings.HasPrefix(region, q+e.old+q) {
			return nil, false
		}
		changes = append(changes, textChange{start, start + len(q+e.old+q), q + e.new + q})
	}
	out, ok := applyChanges(text, changes)
	if !ok {
		return nil, false
	}
	// The edited text must say what the rewritten tree says.
	var want, got any
	if err := root.Decode(&want); err != nil {
		return nil, false
	}
	if err := yaml.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(want, got) {
		return nil, false
	}
	return out, true
}

// textIndex finds a parsed tree's nodes in the text it was parsed from.
type textIndex struct {
	text       []byte
	lineStarts []int
	// starts are every node's start, sorted, so that a scalar's text
	// ends before the next.
	starts []int
}

func newTextIndex(text []byte, root *yaml.Node) *textIndex {
	x := &textIndex{text: text, lineStarts: []int{0}}
	for i, b := range text {
		if b == '\n' {
			x.lineStarts = append(x.lineStarts, i+1)
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if off, ok := x.offset(n); ok && n.Kind != yaml.DocumentNode {
			x.starts = append(x.starts, off)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	sort.Ints(x.starts)
	return x
}

// offset is where a node starts in the text, from its line and column.
func (x *textIndex) offset(n *yaml.Node) (int, bool) {
	if n.Line < 1 || n.Line > len(x.lineStarts) || n.Column < 1 {
		return 0, false
	}
	off := x.lineStarts[n.Line-1]
	for col := 1; col < n.Column; col++ { // columns count characters
		if off >= len(x.text) || x.text[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(x.text[off:])
		off += size
	}
	return off, true
}

// end is where the text of the node starting at start ends: where the
// next node starts, or the end of the text.
func (x *textIndex) end(start int) int {
	if i := sort.SearchInts(x.starts, start+1); i < len(x.starts) {
		return x.starts[i]
	}
	return len(x.text)
}

// textChange replaces text[start:end] with text.
type textChange struct {
	start, end int
	text       string
}

// applyChanges makes the changes in a copy of text, from the last to the
// first so that the offsets hold; false if two overlap.
func applyChanges(text []byte, changes []textChange) ([]byte, bool) {
	sort.Slice(changes, func(i, j int) bool { return changes[i].start > changes[j].start })
	out := append([]byte(nil), text...)
	for i, c := range changes {
		if i > 0 && c.end > changes[i-1].start {
			return nil, false // overlapping: cannot happen with distinct nodes
		}
		out = append(out[:c.start], append([]byte(c.text), out[c.end:]...)...)
	}
	return out, true
}

// encode writes the rewritten tree in the document's indentation style.
// The encoder would write a folded expression on one line: a rewritten
// folded expression becomes a literal block with the lines it was written
// on (CEL reads a line break as a space).
func (m *migrator) encode(text []byte, root *yaml.Node) ([]byte, error) {
	for _, e := range m.edits {
		if e.cel && e.node.Style&yaml.FoldedStyle != 0 {
			out, _, _ := rewriteCEL(m.blockText(e.node), m.opts.DriverName)
			if strings.HasSuffix(e.node.Value, "\n") && !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			e.node.Style = yaml.LiteralStyle
			e.node.Value = out
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	indent, compact := styleOf(text)
	enc.SetIndent(indent)
	if compact {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
