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

package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// Source says where an object came from: the file, the document (0-based
// index in a multi-document stream) and a line. An object's own Source
// points at its first line; Source.At points at one of its fields.
type Source struct {
	File     string `json:"file"`
	Document int    `json:"document"`
	Line     int    `json:"line"`
	// doc is the document the object was read from, shared by every object
	// in it; path is where the object sits in it: "" for the document
	// itself, "items[2]" for an item of a List, "spec.template" for the pod
	// template of a workload.
	doc  *document
	path string
}

func (s Source) String() string {
	switch {
	case s.File == "":
		return "(built in)"
	case s.Line == 0 && s.doc == nil:
		return s.File // an object that came from no file, e.g. "(cluster)"
	}
	return fmt.Sprintf("%s:%d (document %d)", s.File, s.Line, s.Document)
}

// document is one YAML document of a file and the line it starts on. Its
// node tree is parsed only when a line is asked for: most objects never
// need one.
type document struct {
	text []byte
	line int // the file line of the document's first line
	once sync.Once
	root *yaml.Node // nil when the text does not parse as YAML nodes
}

func (d *document) node() *yaml.Node {
	d.once.Do(func() {
		var n yaml.Node
		if err := yaml.Unmarshal(d.text, &n); err != nil || len(n.Content) == 0 {
			return
		}
		d.root = n.Content[0]
	})
	return d.root
}

// within returns the source of an object nested in this one, at a field
// path relative to it (an item of a List, a workload's pod template).
func (s Source) within(field string) Source {
	if field == "" {
		return s
	}
	out := s
	out.path = joinPath(s.path, field)
	out.Line = s.lineOf(out.path)
	return out
}

// At returns the source of a field of the object, with the line it is on:
// field is a path as the API server writes it in errors, e.g.
// "spec.devices.requests[0].exactly.selectors[1].cel.expression"; map keys
// go in brackets ("capacity.requests[gpu.gpudra.io/memory]"). Segments
// that the document does not have are skipped, so paths of the v1 API
// also find their fields in a v1beta1 document (which has no "exactly").
// Where no segment is found, the object's own line is kept.
func (s Source) At(field string) Source {
	out := s
	if field == "" || s.doc == nil {
		return out
	}
	out.Line = s.lineOf(joinPath(s.path, field))
	return out
}

// Field returns the path of a field of the object in its document: for a
// pod made from a Deployment, "spec.template.spec.containers[0]".
func (s Source) Field(field string) string {
	return joinPath(s.path, field)
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// lineOf resolves a path from the document's root to a file line.
func (s Source) lineOf(path string) int {
	root := s.doc.node()
	if root == nil {
		return s.Line
	}
	n, found := root, root
	for _, seg := range splitPath(path) {
		next := child(n, seg)
		if next == nil {
			continue // not in this document: try the next segment here
		}
		n, found = next, next
	}
	return s.doc.line + found.Line - 1
}

// child returns the node a path segment names under n: a mapping key (its
// key node, which carries the line a user looks for) and, through it, the
// value; or a sequence item.
func child(n *yaml.Node, seg string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg {
				v := n.Content[i+1]
				// Keep the key's line: a block scalar's value starts a
				// line later, and a caret reads best at the key.
				return &yaml.Node{Kind: v.Kind, Content: v.Content, Line: n.Content[i].Line, Value: v.Value}
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

// splitPath splits "a.b[0].c[x/y]" into a, b, 0, c, x/y.
func splitPath(path string) []string {
	var segs []string
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(segs, path[1:])
			}
			segs = append(segs, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				return append(segs, path)
			}
			segs = append(segs, path[:end])
			path = path[end:]
		}
	}
	return segs
}
