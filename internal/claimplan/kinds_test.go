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

package claimplan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestKindsComplete: Kinds lists every Kind constant once, each one that
// gpudra check cannot meet says why, and each is made somewhere: by this
// package, or by the node state for the steps after the plan. So the
// list internal/check's corpus is measured against is the list of what a
// prepare can end in.
func TestKindsComplete(t *testing.T) {
	declared := kindConstants(t)
	listed := map[Kind]bool{}
	for _, k := range Kinds {
		if listed[k.Kind] {
			t.Errorf("Kinds lists %s twice", k.Kind)
		}
		listed[k.Kind] = true
		if !k.Checkable && k.Why == "" {
			t.Errorf("%s: neither checkable nor says why not", k.Kind)
		}
		if k.Checkable && k.Why != "" {
			t.Errorf("%s: checkable, yet says why not", k.Kind)
		}
	}
	used := kindUses(t, ".", "../nodestate")
	for name, kind := range declared {
		if !listed[kind] {
			t.Errorf("Kind %s (%s) is missing from Kinds", name, kind)
		}
		if !used[name] {
			t.Errorf("Kind %s is made nowhere (internal/claimplan, internal/nodestate)", name)
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("Kinds has %d entries, %d Kind constants are declared", len(listed), len(declared))
	}
}

// kindConstants are the Kind constants of refusal.go, by name.
func kindConstants(t *testing.T) map[string]Kind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "refusal.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Kind{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			lit := vs.Values[0].(*ast.BasicLit)
			out[vs.Names[0].Name] = Kind(strings.Trim(lit.Value, `"`))
		}
	}
	if len(out) == 0 {
		t.Fatal("no Kind constants in refusal.go")
	}
	return out
}

// kindUses are the Kind constants that the product code of the given
// package directories names outside refusal.go.
func kindUses(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "refusal.go" && dir == "." {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "claimplan" {
						out[x.Sel.Name] = true
					}
				case *ast.Ident:
					if dir == "." {
						out[x.Name] = true
					}
				}
				return true
			})
		}
	}
	return out
}

// TestCapacityNames: the capacities a share is measured by are the ones
// the slice builder publishes.
func TestCapacityNames(t *testing.T) {
	if CapacityMemory != slicebuilder.CapMemory || CapacityMultiprocessors != slicebuilder.CapMultiprocessors {
		t.Errorf("capacity names %s, %s; the slice builder publishes %s, %s", CapacityMemory, CapacityMultiprocessors, slicebuilder.CapMemory, slicebuilder.CapMultiprocessors)
	}
}
