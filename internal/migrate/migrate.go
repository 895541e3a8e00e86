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

// Package migrate rewrites manifests written for NVIDIA's DRA driver
// (dra-driver-nvidia-gpu: driver gpu.nvidia.com, DeviceClasses
// gpu.nvidia.com and mig.nvidia.com, opaque configs in
// resource.nvidia.com/v1beta1) into gpudra's equivalents, and reports what
// has none. It backs `gpudra migrate`.
//
// It reads the files gpudra check reads (scheduler.ReadPaths) and changes
// only the YAML documents that name NVIDIA's driver: the others are copied
// byte for byte, and a changed document keeps its comments, key order,
// quoting and indentation style. Everything it does is renaming: class
// names, driver names, attribute domains and names, and the config kinds
// and fields; no request, selector or constraint is added or removed.
//
// Facts about NVIDIA's driver (attribute names, classes, config fields)
// are from github.com/NVIDIA/k8s-dra-driver-gpu@22407113 (the repository
// is now kubernetes-sigs/dra-driver-nvidia-gpu, which has that commit):
// cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go (attributes and
// capacities), deployments/helm/dra-driver-nvidia-gpu/templates/
// deviceclass-*.yaml (classes) and api/nvidia.com/resource/v1beta1
// (configs), and for the attribute names of older releases the history of
// deviceinfo.go (pcieBusID became resource.kubernetes.io/pciBusID in
// dcdeb68b; parentMinor was dropped in ca43bb70).
package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// Options configure Files.
type Options struct {
	// DriverName is the driver gpudra runs as (default gpu.gpudra.io); the
	// chart names its classes after it.
	DriverName string
}

// NoteKind says what happened to one thing migrate found.
type NoteKind string

const (
	// Rewritten: changed to gpudra's equivalent.
	Rewritten NoteKind = "rewritten"
	// Dropped: a document removed, because gpudra provides its equivalent
	// (NVIDIA's own DeviceClasses) or because it only makes sense for
	// NVIDIA's driver (its ResourceSlices).
	Dropped NoteKind = "dropped"
	// NoEquivalent: left as it is, because gpudra has nothing like it;
	// the message says why and what to do. The output carries it as a
	// comment where it is.
	NoEquivalent NoteKind = "no-equivalent"
	// Unreadable: a file that is not YAML (a Go template, a broken file):
	// skipped, nothing written for it.
	Unreadable NoteKind = "unreadable"
)

// Note is one thing migrate changed or could not change.
type Note struct {
	File    string   `json:"file"`
	Line    int      `json:"line"`
	Object  string   `json:"object,omitempty"` // "ResourceClaimTemplate gpu-test4/mig-devices"
	Field   string   `json:"field,omitempty"`  // "spec.spec.devices.requests[0].exactly.deviceClassName"
	Kind    NoteKind `json:"kind"`
	Message string   `json:"message"`
}

func (n Note) String() string {
	s := fmt.Sprintf("%s:%d: %s", n.File, n.Line, n.Kind)
	if n.Object != "" {
		s += ": " + n.Object
	}
	if n.Field != "" {
		s += " " + n.Field
	}
	return s + ": " + n.Message
}

// Output is one input file after migration.
type Output struct {
	Name    string // the input's name
	Data    []byte // the migrated text
	Changed bool   // whether any document changed
	// Skipped says why the file was not migrated (it is not YAML); Data
	// is then empty.
	Skipped string
}

// Result is what Files did.
type Result struct {
	Files []Output
	Notes []Note
}

// Unmigrated counts the notes of things left without an equivalent, and
// the files skipped.
func (r *Result) Unmigrated() int {
	n := 0
	for _, note := range r.Notes {
		if note.Kind == NoEquivalent || note.Kind == Unreadable {
			n++
		}
	}
	return n
}

// Skipped counts the files that were not migrated.
func (r *Result) Skipped() int {
	n := 0
	for _, f := range r.Files {
		if f.Skipped != "" {
			n++
		}
	}
	return n
}

// Files migrates each input file, one after the other: a file that is not
// YAML (a Helm template, a broken file) is reported and skipped, and the
// others are migrated.
func Files(in []scheduler.File, opts Options) (*Result, error) {
	if opts.DriverName == "" {
		opts.DriverName = gpu.DefaultDriverName
	}
	res := &Result{}
	scan := scanInputs(in)
	for _, f := range in {
		notes := len(res.Notes)
		out, err := migrateFile(f, opts, scan, res)
		if err != nil {
			n := Note{File: f.Name, Kind: Unreadable, Message: err.Error()}
			_ = errors.As(err, &n)
			res.Notes = append(res.Notes[:notes], n)
			out = Output{Name: f.Name, Skipped: n.Message}
		}
		res.Files = append(res.Files, out)
	}
	return res, nil
}

func migrateFile(f scheduler.File, opts Options, scan *inputs, res *Result) (Output, error) {
	docs := scheduler.SplitDocuments(f.Data)
	var buf bytes.Buffer
	changed := false
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		if !scheduler.OnlyComments(d.Text) && scheduler.IsTemplate(d.Text) {
			return Output{}, Note{File: f.Name, Line: d.Line, Kind: Unreadable,
				Message: "a Go template (a Helm chart's?), not a manifest: skipped; render it first and migrate what it renders to (helm template RELEASE CHART | gpudra migrate -)"}
		}
		text, docChanged, err := migrateDocument(f.Name, d, opts, scan, res)
		if err != nil {
			return Output{}, err
		}
		changed = changed || docChanged
		buf.Write(text)
	}
	if !changed {
		return Output{Name: f.Name, Data: f.Data}, nil
	}
	return Output{Name: f.Name, Data: buf.Bytes(), Changed: true}, nil
}

// Error makes a Note an error: what stops a file's migration.
func (n Note) Error() string { return n.String() }

// migrateDocument returns the document's new text, or its old one when
// nothing in it changes.
func migrateDocument(file string, d scheduler.Document, opts Options, scan *inputs, res *Result) ([]byte, bool, error) {
	if scheduler.OnlyComments(d.Text) {
		return d.Text, false, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(d.Text, &root); err != nil {
		return nil, false, Note{File: file, Line: d.Line, Kind: Unreadable, Message: fmt.Sprintf("malformed YAML, skipped: %v", err)}
	}
	if len(root.Content) == 0 {
		return d.Text, false, nil
	}
	m := &migrator{opts: opts, in: scan, file: file, text: d.Text, lineOffset: d.Line - 1, lines: strings.Split(string(d.Text), "\n")}
	obj := root.Content[0]
	drop := m.object(obj, "")
	sort.SliceStable(m.notes, func(i, j int) bool { return m.notes[i].Line < m.notes[j].Line })
	res.Notes = append(res.Notes, m.notes...)
	if drop != "" {
		return []byte(commentOut(drop, d.Text)), true, nil
	}
	if m.replacement != nil {
		return m.replacement, true, nil
	}
	out := d.Text
	if m.changed {
		var err error
		if out, err = m.write(d.Text, &root); err != nil {
			return nil, false, Note{File: file, Line: d.Line, Kind: Unreadable, Message: fmt.Sprintf("cannot write the migrated document, skipped: %v", err)}
		}
	}
	// What has no equivalent is said in the output too, where it is (or
	// above a document written anew).
	annotated := m.annotate(out, m.encoded)
	if !sameYAML(annotated, out) {
		// A comment landed inside a multi-line scalar: say it all above
		// the document instead.
		annotated = m.annotate(out, true)
	}
	return annotated, m.changed || !bytes.Equal(annotated, d.Text), nil
}

// commentOut replaces a dropped document by a comment that says why and
// keeps its text, commented, for reference.
func commentOut(why string, text []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gpudra migrate: %s\n", why)
	for _, l := range strings.SplitAfter(strings.TrimRight(string(text), "\n"), "\n") {
		if strings.TrimSpace(l) == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# " + strings.TrimSuffix(l, "\n") + "\n")
	}
	return b.String()
}

// styleOf finds a document's indentation (the smallest indent of a
// nested key) and whether its sequences are compact (items at the indent
// of their key, as kubectl writes them) or indented.
func styleOf(text []byte) (indent int, compact bool) {
	indent, compact = 2, true
	lines := strings.Split(string(text), "\n")
	smallest := 0
	seqSeen := false
	prevIndent, prevKey := -1, false
	for _, l := range lines {
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		n := len(l) - len(t)
		if n > 0 && !strings.HasPrefix(t, "- ") && (smallest == 0 || n < smallest) {
			smallest = n
		}
		if strings.HasPrefix(t, "- ") && !seqSeen && prevKey {
			seqSeen = true
			compact = n == prevIndent
		}
		prevIndent = n
		prevKey = strings.HasSuffix(strings.TrimRight(t, " "), ":")
	}
	if smallest >= 2 && smallest <= 8 {
		indent = smallest
	}
	return indent, compact
}

// sameYAML says whether two documents hold the same data (comments aside).
func sameYAML(a, b []byte) bool {
	var x, y any
	if yaml.Unmarshal(a, &x) != nil || yaml.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
