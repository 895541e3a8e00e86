package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"
)

// InputError means the input cannot be used at all (unreadable file,
// malformed YAML, an unknown kind, an empty file): gpudra check exits 2.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Source says where an object came from: the file, the document (0-based
// index in a multi-document stream) and the line the document starts on.
type Source struct {
	File     string `json:"file"`
	Document int    `json:"document"`
	Line     int    `json:"line"`
	text     []byte // the document, for locating expressions
	docLine  int    // the line the document starts on
}

func (s Source) String() string {
	if s.File == "" {
		return "(built in)"
	}
	return fmt.Sprintf("%s:%d (document %d)", s.File, s.Line, s.Document)
}

// lineOf returns the file line of the first occurrence of needle in the
// document, or the document's first line.
func (s Source) lineOf(needle string) int {
	needle = strings.TrimSpace(needle)
	if i := strings.IndexAny(needle, "\n"); i >= 0 {
		needle = needle[:i]
	}
	// A folded scalar (>-) joins lines, so try shorter and shorter
	// prefixes until one is on a single line of the file.
	for _, n := range []int{40, 24, 12} {
		prefix := needle
		if len(prefix) > n {
			prefix = prefix[:n]
		}
		if prefix == "" {
			break
		}
		if i := bytes.Index(s.text, []byte(prefix)); i >= 0 {
			return s.docLine + bytes.Count(s.text[:i], []byte("\n"))
		}
	}
	return s.Line
}

// Object is one decoded input object.
type Object struct {
	Source Source
	Kind   string
	Name   string // namespace/name for namespaced objects
	Obj    runtime.Object
}

// Inputs are the objects gpudra check works on.
type Inputs struct {
	Classes   []Object // *resourceapi.DeviceClass
	Templates []Object // *resourceapi.ResourceClaimTemplate
	Claims    []Object // *resourceapi.ResourceClaim
	Pods      []Object // *v1.Pod
	Slices    []Object // *resourceapi.ResourceSlice
	// Ignored lists Kubernetes objects that have nothing to check
	// (Namespaces, ConfigMaps, ...), one "source: kind name" each.
	Ignored []string
	// Strict lists unknown or duplicated fields, which the API server
	// drops or rejects: findings, not fatal.
	Strict []Finding
}

func (in *Inputs) empty() bool {
	return len(in.Classes)+len(in.Templates)+len(in.Claims)+len(in.Pods)+len(in.Slices) == 0
}

// strictCodecs decodes like the API server with field validation Strict.
var strictCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)

// LoadPaths reads YAML files, and the *.yaml, *.yml and *.json files of
// directories (recursively), in the order given; a path "-" is stdin.
func LoadPaths(paths []string, stdin func() ([]byte, error)) (*Inputs, error) {
	in := &Inputs{}
	for _, p := range paths {
		if p == "-" {
			if stdin == nil {
				return nil, inputErrorf("-: no standard input")
			}
			data, err := stdin()
			if err != nil {
				return nil, inputErrorf("standard input: %v", err)
			}
			if err := in.Add("<stdin>", data); err != nil {
				return nil, err
			}
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, inputErrorf("%v", err)
		}
		if !st.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, inputErrorf("%v", err)
			}
			if err := in.Add(p, data); err != nil {
				return nil, err
			}
			continue
		}
		dir := os.DirFS(p)
		files, err := manifestFiles(dir)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, inputErrorf("%s: no *.yaml, *.yml or *.json files in this directory", p)
		}
		if err := in.addFiles(dir, p, files); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// LoadFS reads every *.yaml file of fsys (recursively, sorted), e.g. the
// DeviceClasses and examples built into the binary.
func LoadFS(fsys fs.FS, prefix string) (*Inputs, error) {
	in := &Inputs{}
	files, err := manifestFiles(fsys)
	if err != nil {
		return nil, err
	}
	if err := in.addFiles(fsys, prefix, files); err != nil {
		return nil, err
	}
	return in, nil
}

// manifestFiles lists the *.yaml, *.yml and *.json files of fsys,
// recursively, sorted.
func manifestFiles(fsys fs.FS) ([]string, error) {
	var files []string
	err := fs.WalkDir(fsys, ".", func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isManifestName(f) {
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	sort.Strings(files)
	return files, nil
}

// addFiles reads files of fsys into in, naming each prefix/file in messages.
func (in *Inputs) addFiles(fsys fs.FS, prefix string, files []string) error {
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return inputErrorf("%v", err)
		}
		if err := in.Add(path.Join(prefix, f), data); err != nil {
			return err
		}
	}
	return nil
}

func isManifestName(f string) bool {
	switch strings.ToLower(filepath.Ext(f)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// document is one YAML document and the line it starts on.
type document struct {
	line int
	text []byte
}

// splitDocuments splits a multi-document YAML stream at "---" lines,
// keeping line numbers.
func splitDocuments(data []byte) []document {
	var docs []document
	start, startLine := 0, 1
	line := 1
	for i := 0; i <= len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data) + 1
		if end >= 0 {
			end += i
			next = end + 1
		} else {
			end = len(data)
		}
		l := bytes.TrimRight(data[i:end], " \t\r")
		if bytes.Equal(l, []byte("---")) || bytes.HasPrefix(l, []byte("--- ")) {
			docs = append(docs, document{line: startLine, text: data[start:i]})
			start, startLine = next, line+1
			if start > len(data) {
				start = len(data)
			}
		}
		i = next
		line++
	}
	docs = append(docs, document{line: startLine, text: data[start:]})
	return docs
}

// leadingComments counts the comment and blank lines a document starts
// with, so that an object's line is that of its first field.
func leadingComments(doc []byte) int {
	n := 0
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return n
		}
		n++
	}
	return 0
}

func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// Add decodes every document of one file. Malformed YAML, a document that
// is not a Kubernetes object, an unknown kind or a file without objects is
// an InputError.
func (in *Inputs) Add(file string, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return inputErrorf("%s: the file is empty", file)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return inputErrorf("%s: not a text file (it contains NUL bytes)", file)
	}
	objects := 0
	for i, doc := range splitDocuments(data) {
		if onlyComments(doc.text) {
			continue
		}
		src := Source{File: file, Document: i, Line: doc.line + leadingComments(doc.text), text: doc.text, docLine: doc.line}
		n, err := in.addDocument(src, doc.text)
		if err != nil {
			return err
		}
		objects += n
	}
	if objects == 0 {
		return inputErrorf("%s: the file holds no objects (only comments or empty documents)", file)
	}
	return nil
}

func (in *Inputs) addDocument(src Source, text []byte) (int, error) {
	js, err := sigsyaml.YAMLToJSON(text)
	if err != nil {
		return 0, inputErrorf("%s: malformed YAML: %s", src, yamlError(err, src.Line))
	}
	var meta struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &meta); err != nil {
		return 0, inputErrorf("%s: not a Kubernetes object (a YAML mapping with apiVersion and kind): %v", src, err)
	}
	if meta.Kind == "" || meta.APIVersion == "" {
		return 0, inputErrorf("%s: not a Kubernetes object: apiVersion and kind are required", src)
	}
	if meta.Kind == "List" || strings.HasSuffix(meta.Kind, "List") && meta.Items != nil {
		n := 0
		for _, item := range meta.Items {
			c, err := in.addDocument(src, []byte(item))
			if err != nil {
				return 0, err
			}
			n += c
		}
		return n, nil
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return 0, inputErrorf("%s: apiVersion %q: %v", src, meta.APIVersion, err)
	}
	gvk := gv.WithKind(meta.Kind)
	if !scheme.Scheme.Recognizes(gvk) {
		if gv.Group == resourceapi.GroupName {
			return 0, inputErrorf("%s: unknown kind %s in %s (gpudra check reads DeviceClass, ResourceClaimTemplate, ResourceClaim and ResourceSlice of resource.k8s.io/v1)", src, meta.Kind, meta.APIVersion)
		}
		return 0, inputErrorf("%s: unknown kind %s in %s (gpudra check reads DeviceClass, ResourceClaimTemplate, ResourceClaim, ResourceSlice and Pod)", src, meta.Kind, meta.APIVersion)
	}
	if gv.Group == resourceapi.GroupName && gv.Version != "v1" {
		return 0, inputErrorf("%s: %s %s: gpudra check reads resource.k8s.io/v1 (Kubernetes 1.34+); convert this object to apiVersion resource.k8s.io/v1", src, meta.APIVersion, meta.Kind)
	}
	obj, _, err := strictCodecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil && !runtime.IsStrictDecodingError(err) {
		return 0, inputErrorf("%s: %s: %v", src, meta.Kind, err)
	}
	o := Object{Source: src, Kind: meta.Kind, Obj: obj}
	if acc, ok := obj.(interface {
		GetName() string
		GetNamespace() string
	}); ok {
		o.Name = acc.GetName()
		if acc.GetNamespace() != "" {
			o.Name = acc.GetNamespace() + "/" + o.Name
		}
	}
	if err != nil {
		sde, _ := runtime.AsStrictDecodingError(err)
		for _, e := range sde.Errors() {
			in.Strict = append(in.Strict, Finding{
				Kind: FindingUnknownField, Source: src, Object: o.Kind + " " + o.Name,
				Message: "the API server rejects or drops this field: " + e.Error(),
				Hint:    "check the spelling against `kubectl explain " + strings.ToLower(o.Kind) + "`",
			})
		}
	}
	switch t := obj.(type) {
	case *resourceapi.DeviceClass:
		in.Classes = append(in.Classes, o)
	case *resourceapi.ResourceClaimTemplate:
		if t.Namespace == "" {
			t.Namespace = "default"
			o.Name = "default/" + t.Name
		}
		in.Templates = append(in.Templates, o)
	case *resourceapi.ResourceClaim:
		if t.Namespace == "" {
			t.Namespace = "default"
			o.Name = "default/" + t.Name
		}
		in.Claims = append(in.Claims, o)
	case *v1.Pod:
		if t.Namespace == "" {
			t.Namespace = "default"
			o.Name = "default/" + t.Name
		}
		in.Pods = append(in.Pods, o)
	case *resourceapi.ResourceSlice:
		in.Slices = append(in.Slices, o)
	default:
		in.Ignored = append(in.Ignored, fmt.Sprintf("%s: %s %s", src, meta.Kind, o.Name))
	}
	return 1, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError drops the converter's prefix and turns the document's line
// numbers into the file's.
func yamlError(err error, docLine int) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+docLine-1)
	})
}

// Merge appends other's objects to in.
func (in *Inputs) Merge(other *Inputs) {
	in.Classes = append(in.Classes, other.Classes...)
	in.Templates = append(in.Templates, other.Templates...)
	in.Claims = append(in.Claims, other.Claims...)
	in.Pods = append(in.Pods, other.Pods...)
	in.Slices = append(in.Slices, other.Slices...)
	in.Ignored = append(in.Ignored, other.Ignored...)
	in.Strict = append(in.Strict, other.Strict...)
}
