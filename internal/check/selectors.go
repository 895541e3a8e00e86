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

package check

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// selector is one CEL expression in the input and its compilation.
type selector struct {
	source    scheduler.Source
	result    cel.CompilationResult
	ok        bool     // compiled, within limits
	infoIndex int      // in Report.Selectors
	refs      []celRef // what it reads of the device
	// dynamic means it reads the device in a way refs do not capture
	// (iterating over a map, a computed key): no evaluation sharing.
	dynamic bool
	// badVersions are semver() literals that are no semantic version:
	// the call fails at run time, on every device.
	badVersions []celLiteral
}

// celLiteral is a literal in an expression and its AST node.
type celLiteral struct {
	text string
	id   int64
}

// celRef is one read of device.attributes[domain].name or
// device.capacity[domain].name with constant keys, or of device.driver
// compared with a literal.
type celRef struct {
	what     string // "attributes", "capacity" or "driver"
	domain   string
	name     string // attribute/capacity name; the literal for driver
	testOnly bool   // has(), .? or [?]: absence is not an error
	// domainOnly: device.attributes['x'] or device.capacity['x'] not
	// followed by a name (name is then ""): often a name used as the
	// domain, device.capacity['memory'].
	domainOnly bool
	id         int64 // AST node, for the position
	compared   *types.Type
	cmpOp      string
	cmpLit     string
}

// compiler compiles selectors the way the API server validates them on
// create: the DRA CEL environment for new expressions, cost estimation
// against resource.k8s.io's limit, the length limit.
type compiler struct {
	features cel.Features
	cache    map[string]cel.CompilationResult
	analyzed map[string]analysis
	compiled int
}

func newCompiler(features cel.Features) *compiler {
	return &compiler{features: features, cache: map[string]cel.CompilationResult{}, analyzed: map[string]analysis{}}
}

func (c *compiler) compile(expr string) cel.CompilationResult {
	if r, ok := c.cache[expr]; ok {
		return r
	}
	envType := environment.NewExpressions
	r := cel.GetCompiler(c.features).CompileCELExpression(expr, cel.Options{EnvType: &envType})
	c.compiled++
	c.cache[expr] = r
	return r
}

// analyze records what the compiled expression reads of the device
// (once per expression).
func (c *compiler) analyze(s *selector) {
	if a, ok := c.analyzed[s.result.Expression]; ok {
		s.refs, s.dynamic, s.badVersions = a.refs, a.dynamic, a.badVersions
		return
	}
	s.dynamic = true
	if env := s.result.Environment; env != nil {
		if checked, iss := env.Compile(s.result.Expression); iss.Err() == nil {
			s.refs, s.dynamic = deviceRefs(checked)
			s.badVersions = badSemvers(checked)
		}
	}
	c.analyzed[s.result.Expression] = analysis{s.refs, s.dynamic, s.badVersions}
}

type analysis struct {
	refs        []celRef
	dynamic     bool
	badVersions []celLiteral
}

// parsedRefs are the device reads of an expression that does not compile,
// from its syntax alone (no types).
func parsedRefs(expr string) []celRef {
	env, err := celgo.NewEnv()
	if err != nil {
		return nil
	}
	parsed, iss := env.Parse(expr)
	if iss.Err() != nil {
		return nil
	}
	refs, _ := deviceRefs(parsed)
	return refs
}

// badSemvers finds semver('…') calls whose literal the Kubernetes CEL
// library rejects (semver('8.0'), semver('v1.2.3')): it parses strictly
// unless the second argument asks to normalize.
func badSemvers(checked *celgo.Ast) []celLiteral {
	var out []celLiteral
	root := ast.NavigateAST(checked.NativeRep())
	for _, n := range ast.MatchDescendants(root, ast.FunctionMatcher("semver")) {
		args := n.AsCall().Args()
		if len(args) == 0 || args[0].Kind() != ast.LiteralKind {
			continue
		}
		lit, ok := args[0].AsLiteral().Value().(string)
		if !ok {
			continue
		}
		if len(args) == 2 && args[1].Kind() == ast.LiteralKind && args[1].AsLiteral().Value() == true {
			continue // normalized: '8.0' is fine
		}
		if _, err := semver.Parse(lit); err != nil {
			out = append(out, celLiteral{text: lit, id: args[0].ID()})
		}
	}
	return out
}

func deviceRefs(checked *celgo.Ast) ([]celRef, bool) {
	native := checked.NativeRep()
	root := ast.NavigateAST(native)
	var refs []celRef
	dynamic := false
	for _, n := range ast.MatchDescendants(root, ast.KindMatcher(ast.IdentKind)) {
		if n.AsIdent() != "device" {
			continue
		}
		p, ok := n.Parent()
		if !ok || p.Kind() != ast.SelectKind {
			dynamic = true
			continue
		}
		field := p.AsSelect().FieldName()
		switch field {
		case "driver":
			if lit, ok := comparedLiteral(p); ok {
				refs = append(refs, celRef{what: "driver", name: lit, id: p.ID()})
			}
			continue
		case "allowMultipleAllocations":
			continue
		case "attributes", "capacity":
		default:
			dynamic = true
			continue
		}
		domainNode, domain, ok := constantKey(p)
		if !ok {
			dynamic = true
			continue
		}
		nameNode, name, ok := constantKey(domainNode)
		if !ok {
			dynamic = true
			refs = append(refs, celRef{what: field, domain: domain, domainOnly: true, id: domainNode.ID()})
			continue
		}
		ref := celRef{what: field, domain: domain, name: name, id: nameNode.ID()}
		ref.testOnly = isPresenceTest(nameNode)
		if op, other, ok := comparison(nameNode); ok {
			ref.cmpOp = op
			if t, isType := literalType(other); isType {
				ref.compared = t
				ref.cmpLit = strings.TrimSpace(literalText(other))
			}
		}
		refs = append(refs, ref)
	}
	return refs, dynamic
}

// constantKey matches parent(n) as n.key, n[key], n[?key] or n.?key with a
// string literal key, returning the parent and the key.
func constantKey(n ast.NavigableExpr) (ast.NavigableExpr, string, bool) {
	p, ok := n.Parent()
	if !ok {
		return nil, "", false
	}
	switch p.Kind() {
	case ast.SelectKind:
		return p, p.AsSelect().FieldName(), true
	case ast.CallKind:
		call := p.AsCall()
		switch call.FunctionName() {
		case operators.Index, operators.OptIndex, operators.OptSelect:
		default:
			return nil, "", false
		}
		args := call.Args()
		if len(args) != 2 || args[0].ID() != n.ID() || args[1].Kind() != ast.LiteralKind {
			return nil, "", false
		}
		s, ok := args[1].AsLiteral().Value().(string)
		return p, s, ok
	}
	return nil, "", false
}

// isPresenceTest says whether the access tolerates absence: has(),
// .?name, [?name].
func isPresenceTest(n ast.NavigableExpr) bool {
	switch n.Kind() {
	case ast.SelectKind:
		return n.AsSelect().IsTestOnly()
	case ast.CallKind:
		f := n.AsCall().FunctionName()
		return f == operators.OptIndex || f == operators.OptSelect
	}
	return false
}

var comparisonOps = map[string]string{
	operators.Equals: "==", operators.NotEquals: "!=",
	operators.Less: "<", operators.LessEquals: "<=",
	operators.Greater: ">", operators.GreaterEquals: ">=",
}

// comparison matches parent(n) as n <op> other or other <op> n.
func comparison(n ast.NavigableExpr) (string, ast.Expr, bool) {
	p, ok := n.Parent()
	if !ok || p.Kind() != ast.CallKind {
		return "", nil, false
	}
	call := p.AsCall()
	op, ok := comparisonOps[call.FunctionName()]
	if !ok || len(call.Args()) != 2 {
		return "", nil, false
	}
	a, b := call.Args()[0], call.Args()[1]
	if a.ID() == n.ID() {
		return op, b, true
	}
	return op, a, true
}

func comparedLiteral(n ast.NavigableExpr) (string, bool) {
	_, other, ok := comparison(n)
	if !ok || other.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := other.AsLiteral().Value().(string)
	return s, ok
}

func literalText(e ast.Expr) string {
	v := e.AsLiteral()
	if s, ok := v.Value().(string); ok {
		return "'" + s + "'"
	}
	if t, ok := v.Type().(*types.Type); ok && t == types.BoolType {
		if v.Value().(bool) {
			return "true"
		}
		return "false"
	}
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(fmtAny(v.Value())), "\""))
}

// caret renders the line of expr that holds the AST node id, and a caret
// under the node's first character.
func caret(s *selector, id int64) string {
	if s.result.Environment == nil {
		return ""
	}
	checked, iss := s.result.Environment.Compile(s.result.Expression)
	if iss.Err() != nil {
		return ""
	}
	loc := checked.NativeRep().SourceInfo().GetStartLocation(id)
	return caretAt(s.result.Expression, loc.Line(), loc.Column())
}

func caretAt(expr string, line, col int) string {
	lines := strings.Split(expr, "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	text := lines[line-1]
	if col < 0 || col > len(text) {
		col = 0
	}
	// Tabs keep their width under the caret.
	pad := strings.Map(func(r rune) rune {
		if r == '\t' {
			return '\t'
		}
		return ' '
	}, text[:col])
	return " | " + text + "\n | " + pad + "^"
}

// attributeTypeName names the type of a published attribute as CEL sees it.
func attributeTypeName(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "string"
	case a.IntValue != nil:
		return "int"
	case a.BoolValue != nil:
		return "bool"
	case a.VersionValue != nil:
		return "version"
	}
	return "list"
}

// celTypeName maps a literal's CEL type to the attribute type it can be
// compared with.
func celTypeName(t *types.Type) string {
	switch t {
	case types.StringType:
		return "string"
	case types.IntType, types.UintType:
		return "int"
	case types.BoolType:
		return "bool"
	case types.DoubleType:
		return "double"
	}
	return ""
}

func fmtAny(v any) string { return fmt.Sprint(v) }

func literalType(e ast.Expr) (*types.Type, bool) {
	if e.Kind() != ast.LiteralKind {
		return nil, false
	}
	t, ok := e.AsLiteral().Type().(*types.Type)
	return t, ok
}
