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

package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

const (
	readmeBegin = "<!-- BEGIN GENERATED: go test ./deployments/helm/gpudra -run TestReadmeValues -update -->\n"
	readmeEnd   = "<!-- END GENERATED -->\n"
)

// schemaNode is what the values table reads of values.schema.json.
type schemaNode struct {
	Description string                 `json:"description"`
	Type        any                    `json:"type"`
	Ref         string                 `json:"$ref"`
	Properties  map[string]*schemaNode `json:"properties"`
	Items       *schemaNode            `json:"items"`
	Enum        []any                  `json:"enum"`
	Definitions map[string]*schemaNode `json:"definitions"`
}

// valueRows lists one row per value: its key, its default in values.yaml
// and its description in the schema. Objects with properties are
// expanded; a list of objects (nodePools) lists its items' keys as
// key[].name.
func valueRows(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root schemaNode
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	rawValues, err := os.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(rawValues, &values); err != nil {
		t.Fatal(err)
	}
	resolve := func(n *schemaNode) *schemaNode {
		for n != nil && n.Ref != "" {
			d := root.Definitions[strings.TrimPrefix(n.Ref, "#/definitions/")]
			if d == nil {
				t.Fatalf("values.schema.json: %s is no definition", n.Ref)
			}
			// A reference's own description says more than the
			// definition's.
			merged := *d
			if n.Description != "" {
				merged.Description = n.Description
			}
			n = &merged
		}
		return n
	}
	var rows []string
	var walk func(prefix string, n *schemaNode, def any, hasDefault bool)
	walk = func(key string, n *schemaNode, def any, hasDefault bool) {
		n = resolve(n)
		if n.Description == "" {
			t.Errorf("values.schema.json: %s has no description", key)
		}
		if len(n.Properties) > 0 {
			defs, _ := def.(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(n.Properties)) {
				v, ok := defs[k]
				walk(key+"."+k, n.Properties[k], v, ok)
			}
			return
		}
		d := ""
		if hasDefault {
			b, err := json.Marshal(def)
			if err != nil {
				t.Fatal(err)
			}
			d = "`" + string(b) + "`"
		}
		desc := n.Description
		if len(n.Enum) > 0 {
			var e []string
			for _, v := range n.Enum {
				e = append(e, fmt.Sprintf("`%v`", v))
			}
			desc += " (" + strings.Join(e, ", ") + ")"
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", strings.TrimPrefix(key, "."), d, markdown(desc)))
		if items := resolve(n.Items); items != nil && len(items.Properties) > 0 {
			for _, k := range slices.Sorted(maps.Keys(items.Properties)) {
				p := resolve(items.Properties[k])
				rows = append(rows, fmt.Sprintf("| `%s[].%s` | | %s |", strings.TrimPrefix(key, "."), k, markdown(p.Description)))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(root.Properties)) {
		if k == "global" {
			continue
		}
		v, ok := values[k]
		walk("."+k, root.Properties[k], v, ok)
	}
	return rows
}

// markdown escapes a description for a table cell.
var markdown = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace

// TestReadmeValues keeps README.md's table of values equal to the
// schema's descriptions and values.yaml's defaults; every schema property
// has a description.
func TestReadmeValues(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("\n| value | default | what it does |\n| --- | --- | --- |\n")
	for _, r := range valueRows(t) {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
	gpudratest.GoldenRewrite(t, "README.md", func(doc []byte) []byte {
		return gpudratest.ReplaceSection(t, doc, readmeBegin, readmeEnd, b.Bytes())
	})
}
