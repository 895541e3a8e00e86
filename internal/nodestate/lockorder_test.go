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

package nodestate

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestLockOrder asserts, on the package's source, the lock order that
// doc.go states:
//
//   - while a function holds s.mu it takes no other lock, calls no
//     hardware, CDI, MPS or checkpoint code, and waits for no commit, nor
//     calls a method of State that (directly or through the methods it
//     calls) does any of that or takes s.mu itself;
//   - a function that takes a claim lock takes it before any GPU lock, and
//     takes at most one GPU lock (each GPU's in a function or closure of
//     its own, released by defer).
//
// The check reads each function's statements in source order: it knows
// "s.mu.Lock() ... s.mu.Unlock()" and "s.mu.Lock(); defer s.mu.Unlock()",
// which is all this package uses; closures are checked as functions of
// their own (an undo func runs where its caller says).
func TestLockOrder(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]*ast.FuncDecl{}
	var funcs []*ast.FuncDecl
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				funcs = append(funcs, fd)
				if isStateMethod(fd) {
					methods[fd.Name.Name] = fd
				}
			}
		}
	}
	if len(methods) < 20 {
		t.Fatalf("found only %d methods of State: the check does not see the package", len(methods))
	}

	// What each method of State does that must not happen under s.mu,
	// directly or through the methods it calls.
	why := map[string]string{}
	for name, fd := range methods {
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok {
				return false
			}
			if call, ok := n.(*ast.CallExpr); ok && why[name] == "" {
				if r := blocking(call); r != "" {
					why[name] = r
				} else if isMuCall(call, "Lock") {
					why[name] = "takes s.mu"
				}
			}
			return true
		})
	}
	for changed := true; changed; {
		changed = false
		for name, fd := range methods {
			if why[name] != "" {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok {
					return false
				}
				if m := stateCall(n); m != "" && why[m] != "" && why[name] == "" {
					why[name], changed = fmt.Sprintf("calls %s, which %s", m, why[m]), true
				}
				return true
			})
		}
	}

	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s", fset.Position(pos), fmt.Sprintf(format, args...)))
	}
	check := func(name string, body *ast.BlockStmt) {
		held := false // s.mu
		gpuLocks := 0
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // checked on its own below
			case *ast.DeferStmt:
				// defer s.mu.Unlock() keeps s.mu to the end; a deferred
				// unlock of a keyed lock keeps that lock.
				return false
			case *ast.CallExpr:
				switch {
				case isMuCall(n, "Lock"):
					if held {
						report(n.Pos(), "%s takes s.mu twice", name)
					}
					held = true
				case isMuCall(n, "Unlock"):
					held = false
				case isKeyedLock(n, "claimLocks"):
					if gpuLocks > 0 {
						report(n.Pos(), "%s takes a claim lock while it holds a GPU lock (claim locks come first)", name)
					}
				case isKeyedLock(n, "gpuLocks"):
					if gpuLocks > 0 {
						report(n.Pos(), "%s takes a second GPU lock (one at a time)", name)
					}
					gpuLocks++
				}
				if held {
					if r := blocking(n); r != "" {
						report(n.Pos(), "%s %s while it holds s.mu", name, r)
					} else if m := stateCall(n); m != "" && why[m] != "" {
						report(n.Pos(), "%s calls %s while it holds s.mu, and %s %s", name, m, m, why[m])
					}
				}
			}
			return true
		})
	}
	for _, fd := range funcs {
		check(fd.Name.Name, fd.Body)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				check(fd.Name.Name+" (a closure)", lit.Body)
			}
			return true
		})
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// isStateMethod reports whether fd is a method of State, or of a type
// that keeps no state of its own and is handed the State as s (the
// sharing strategies, migPartitions): both work on s the same way.
func isStateMethod(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return false
	}
	for _, p := range fd.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok && slices.ContainsFunc(p.Names, func(n *ast.Ident) bool { return n.Name == "s" }) {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "State" {
				return true
			}
		}
	}
	star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "State"
}

// selectorPath is "s.mu.Lock" for the call s.mu.Lock().
func selectorPath(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return selectorPath(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return selectorPath(e.Fun) + "()"
	}
	return "?"
}

func isMuCall(call *ast.CallExpr, method string) bool {
	return selectorPath(call.Fun) == "s.mu."+method
}

func isKeyedLock(call *ast.CallExpr, which string) bool {
	return selectorPath(call.Fun) == "s."+which+".lock"
}

// blocking says what the call does that must not happen under s.mu, or "".
func blocking(call *ast.CallExpr) string {
	p := selectorPath(call.Fun)
	switch {
	case p == "s.commit":
		return "waits for a commit"
	case p == "s.claimLocks.lock" || p == "s.gpuLocks.lock":
		return "takes a " + strings.TrimSuffix(strings.TrimPrefix(p, "s."), "Locks.lock") + " lock"
	case p == "s.commits.mu.Lock":
		return "takes commits.mu"
	case strings.HasPrefix(p, "s.opts.Hardware."), strings.HasPrefix(p, "s.opts.CDI."),
		strings.HasPrefix(p, "s.opts.MPS."), strings.HasPrefix(p, "s.opts.Checkpoint."):
		return "calls " + strings.TrimPrefix(p, "s.opts.")
	}
	return ""
}

// stateCall is the name of the State (or sharing strategy) method n
// calls, or "".
func stateCall(n ast.Node) string {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok && id.Name == "s" {
		return sel.Sel.Name
	}
	// A method of a type that is handed the State (isStateMethod): it is
	// called with s as its first argument, or its second after ctx.
	for i, arg := range call.Args {
		if id, ok := arg.(*ast.Ident); i < 2 && ok && id.Name == "s" {
			return sel.Sel.Name
		}
	}
	return ""
}
