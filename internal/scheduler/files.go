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
	"os"
	"path/filepath"
)

// File is one input file as LoadPaths reads it, before decoding: Name is
// the path the messages use ("<stdin>" for standard input).
type File struct {
	Name string
	Data []byte
}

// ReadPaths reads the files LoadPaths decodes, in the same order: YAML or
// JSON files, the *.yaml, *.yml and *.json files of directories
// (recursively, sorted), and stdin for a path "-". Tools that rewrite
// manifests (gpudra migrate) read their inputs with it, so that they take
// exactly what gpudra check takes.
func ReadPaths(paths []string, stdin func() ([]byte, error)) ([]File, error) {
	var out []File
	for _, p := range paths {
		if p == "-" {
			if stdin == nil {
				return nil, inputErrorf("-: no standard input")
			}
			data, err := stdin()
			if err != nil {
				return nil, inputErrorf("standard input: %v", err)
			}
			out = append(out, File{Name: "<stdin>", Data: data})
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
			out = append(out, File{Name: p, Data: data})
			continue
		}
		files, err := manifestFiles(os.DirFS(p))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, inputErrorf("%s: no *.yaml, *.yml or *.json files in this directory", p)
		}
		for _, f := range files {
			name := filepath.Join(p, filepath.FromSlash(f))
			data, err := os.ReadFile(name)
			if err != nil {
				return nil, inputErrorf("%v", err)
			}
			out = append(out, File{Name: name, Data: data})
		}
	}
	return out, nil
}

// Document is one YAML document of a multi-document stream: its text as
// written (without the "---" line that ends it) and the file line it
// starts on.
type Document struct {
	Text []byte
	Line int
}

// SplitDocuments splits a YAML stream at "---" lines as Manifests.Add
// does, so that a rewriting tool can keep the documents it does not
// change byte for byte.
func SplitDocuments(data []byte) []Document {
	docs := splitDocuments(data)
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = Document{Text: d.text, Line: d.line}
	}
	return out
}

// OnlyComments says whether a document holds nothing but comments and
// blank lines (Manifests.Add skips such documents).
func OnlyComments(doc []byte) bool { return onlyComments(doc) }
