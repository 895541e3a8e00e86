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
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The sizes development.md ("Habits the checks enforce") holds the code to.
const (
	maxFileLines = 600
	// longFunction is where a function needs an argument for its length.
	longFunction = 80
	// maxLongFunctions is how many may have one.
	maxLongFunctions = 15
)

// maxMethods are the types that once held everything of their package,
// and the most methods each may have.
var maxMethods = map[string]int{
	"internal/plugin.Driver":   30,
	"internal/check.runner":    40,
	"internal/nodestate.State": 40,
}

// longBecause is how a function over longFunction lines argues for its
// length, in its doc comment.
var longBecause = regexp.MustCompile(`(?m)^Long because\b`)

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestCodeSizes: no Go file over maxFileLines lines; a function over
// longFunction lines says in its doc comment, in a paragraph starting
// "Long because", why it is better whole, and there are at most
// maxLongFunctions of them; the types of maxMethods stay within their
// counts. Test files and generated code are left out.
func TestCodeSizes(t *testing.T) {
	fset := token.NewFileSet()
	methods := map[string]int{}
	var long []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s has %d lines, over %d: split it into files named for what they hold", rel, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if recv := receiverType(fn); recv != "" {
				methods[filepath.ToSlash(filepath.Dir(rel))+"."+recv]++
				name = recv + "." + name
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines <= longFunction {
				continue
			}
			long = append(long, rel+": "+name)
			if fn.Doc == nil || !longBecause.MatchString(fn.Doc.Text()) {
				t.Errorf("%s: %s has %d lines, over %d, and no \"Long because\" paragraph in its doc comment: split it into steps, or say why it reads better whole",
					rel, name, lines, longFunction)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > maxLongFunctions {
		t.Errorf("%d functions over %d lines, at most %d may be:\n  %s", len(long), longFunction, maxLongFunctions, strings.Join(long, "\n  "))
	}
	for typ, max := range maxMethods {
		if methods[typ] == 0 {
			t.Errorf("type %s has no methods: is it gone? Update maxMethods", typ)
		}
		if methods[typ] > max {
			t.Errorf("type %s has %d methods, over %d: give what it does not own to a type of its own", typ, methods[typ], max)
		}
	}
}

// receiverType is the name of a method's receiver type ("" for a function).
func receiverType(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
