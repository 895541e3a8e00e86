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
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The rules of Grafana's dashboard linter (grafana/dashboard-linter,
// lint/rule_*.go), encoded over the shipped dashboard: the linter is not
// reachable here, its rules are. Each rule has the linter's name;
// files/dashboards/.lint excludes some, with reasons, as it does for the
// linter. Where gpudra asks more (a unit and a description on every
// panel, not only on the linter's panel types), the rule says so.

const dashboardFile = "files/dashboards/gpudra.json"

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Editable   bool   `json:"editable"`
	Templating struct {
		List []dashboardVar `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardVar struct {
	Name       string          `json:"name"`
	Label      string          `json:"label"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasourceRef  `json:"datasource"`
	Multi      bool            `json:"multi"`
	AllValue   string          `json:"allValue"`
	Refresh    int             `json:"refresh"`
}

// query is a variable's query: a string, or {query: ...}.
func (v dashboardVar) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &q)
	return q.Query
}

type dashboardPanel struct {
	ID          int              `json:"id"`
	Type        string           `json:"type"`
	Title       string           `json:"title"`
	Description string           `json:"description"`
	Datasource  *datasourceRef   `json:"datasource"`
	Targets     []dashboardQuery `json:"targets"`
	FieldConfig *struct {
		Defaults struct {
			Unit     string          `json:"unit"`
			Mappings json.RawMessage `json:"mappings"`
		} `json:"defaults"`
		Overrides []struct {
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Transformations []struct {
		ID      string         `json:"id"`
		Options map[string]any `json:"options"`
	} `json:"transformations"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardQuery struct {
	Expr       string         `json:"expr"`
	RefID      string         `json:"refId"`
	Datasource *datasourceRef `json:"datasource"`
}

// unit is the panel's unit: an override's, else the default.
func (p dashboardPanel) unit() string {
	if p.FieldConfig == nil {
		return ""
	}
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if u, ok := prop.Value.(string); ok && prop.ID == "unit" {
				return u
			}
		}
	}
	return p.FieldConfig.Defaults.Unit
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// panels are the dashboard's panels, rows' children included, rows not.
func (d dashboard) panels() []dashboardPanel {
	var out []dashboardPanel
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// The linter's stand-ins for Grafana's global variables
// (lint/variables.go): odd durations, so that $__rate_interval is told
// from any range written by hand.
var grafanaGlobals = map[string]string{
	"__rate_interval": "8869990787ms", "__interval": "4867856611ms", "__range": "6069770749ms", "__auto": "12345ms",
	"__interval_ms": "7781188786", "__range_ms": "6737667980", "__range_s": "9397795485",
}

var variableRef = regexp.MustCompile(`\$\{([A-Za-z0-9_.]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]`)

// expand replaces Grafana's variables as the linter does: globals by their
// stand-ins, the dashboard's own by their names.
func expand(expr string, vars []dashboardVar) (string, error) {
	var err error
	out := variableRef.ReplaceAllStringFunc(expr, func(m string) string {
		sub := variableRef.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := grafanaGlobals[name]; ok {
			return v
		}
		if slices.ContainsFunc(vars, func(v dashboardVar) bool { return v.Name == name }) {
			return name
		}
		err = fmt.Errorf("unknown variable $%s", name)
		return m
	})
	return out, err
}

func parsePromQL(expr string, vars []dashboardVar) (parser.Expr, error) {
	e, err := expand(expr, vars)
	if err != nil {
		return nil, err
	}
	return parser.ParseExpr(e)
}

// lintExclusions reads files/dashboards/.lint: the rules it excludes, each
// with its reason.
func lintExclusions(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("files/dashboards/.lint")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Exclusions map[string]struct {
			Reason string `json:"reason"`
		} `json:"exclusions"`
	}
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatalf("files/dashboards/.lint: %v", err)
	}
	out := map[string]bool{}
	for rule, e := range cfg.Exclusions {
		if !slices.Contains(lintRules, rule) {
			t.Errorf(".lint excludes %s, which is no rule of the linter", rule)
		}
		if e.Reason == "" {
			t.Errorf(".lint excludes %s without a reason", rule)
		}
		out[rule] = true
	}
	return out
}

// lintRules are the linter's rules (its docs/index.md).
var lintRules = []string{
	"template-datasource-rule", "template-job-rule", "template-instance-rule", "template-label-promql-rule",
	"template-on-time-change-reload-rule", "panel-datasource-rule", "panel-title-description-rule", "panel-units-rule",
	"panel-no-targets-rule", "target-promql-rule", "target-rate-interval-rule", "target-job-rule", "target-instance-rule",
	"target-counter-agg-rule", "uneditable-dashboard",
}

// validUnits are the units Grafana knows (the linter's list, from
// grafana-data's valueFormats/categories.ts), those this dashboard may use.
var validUnits = []string{"none", "string", "short", "percent", "percentunit", "bytes", "decbytes", "s", "ms", "dtdurations",
	"celsius", "watt", "ops", "reqps", "bool"}

// TestDashboardLint: the shipped dashboard passes every rule of Grafana's
// dashboard linter that .lint does not exclude.
func TestDashboardLint(t *testing.T) {
	d := loadDashboard(t)
	excluded := lintExclusions(t)
	rule := func(name string, check func() []string) {
		if !slices.Contains(lintRules, name) {
			t.Fatalf("%s is no rule of the linter", name)
		}
		if excluded[name] {
			return
		}
		for _, problem := range check() {
			t.Errorf("%s: %s", name, problem)
		}
	}
	queryVars := func() []dashboardVar {
		var out []dashboardVar
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				out = append(out, v)
			}
		}
		return out
	}
	templated := func(ds *datasourceRef) bool {
		return ds != nil && (ds.UID == "$datasource" || ds.UID == "${datasource}")
	}

	rule("template-datasource-rule", func() (p []string) {
		var ds []dashboardVar
		for _, v := range d.Templating.List {
			if v.Type == "datasource" {
				ds = append(ds, v)
			}
		}
		if len(ds) != 1 {
			return []string{fmt.Sprintf("%d templated data sources, want one", len(ds))}
		}
		v := ds[0]
		if q := v.query(); q != "prometheus" {
			p = append(p, fmt.Sprintf("the data source variable selects %q, want prometheus", q))
		}
		if v.Name != "datasource" && v.Name != "prometheus_datasource" {
			p = append(p, fmt.Sprintf("the data source variable is named %q, want datasource", v.Name))
		}
		if v.Label != "Data source" && v.Label != "Prometheus data source" {
			p = append(p, fmt.Sprintf("the data source variable is labelled %q, want Data source", v.Label))
		}
		return p
	})
	checkTemplate := func(name string) (p []string) {
		i := slices.IndexFunc(d.Templating.List, func(v dashboardVar) bool { return v.Name == name })
		if i < 0 {
			return []string{"no " + name + " variable"}
		}
		v := d.Templating.List[i]
		if !templated(v.Datasource) || v.Type != "query" || !v.Multi || v.AllValue != ".+" {
			p = append(p, fmt.Sprintf("the %s variable must be a multi-value query of $datasource with allValue .+", name))
		}
		return p
	}
	rule("template-job-rule", func() []string { return checkTemplate("job") })
	rule("template-instance-rule", func() []string { return checkTemplate("instance") })
	rule("template-label-promql-rule", func() (p []string) {
		call := regexp.MustCompile(`^(label_values|label_names|metrics|query_result)\((.+)\)$`)
		for _, v := range queryVars() {
			m := call.FindStringSubmatch(v.query())
			if m == nil {
				p = append(p, fmt.Sprintf("variable %s: %q is no label_values(), label_names(), metrics() or query_result() query", v.Name, v.query()))
				continue
			}
			arg := m[2]
			if m[1] == "label_values" {
				// label_values(<series selector>, <label>)
				i := strings.LastIndex(arg, ",")
				if i < 0 || !regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*$`).MatchString(arg[i+1:]) {
					p = append(p, fmt.Sprintf("variable %s: %q names no label", v.Name, v.query()))
					continue
				}
				arg = arg[:i]
			}
			if m[1] != "metrics" {
				if _, err := parsePromQL(arg, d.Templating.List); err != nil {
					p = append(p, fmt.Sprintf("variable %s: %q: %v", v.Name, v.query(), err))
				}
			}
		}
		return p
	})
	rule("template-on-time-change-reload-rule", func() (p []string) {
		for _, v := range queryVars() {
			if v.Refresh != 2 {
				p = append(p, fmt.Sprintf("variable %s refreshes %d, want 2 (on time range change)", v.Name, v.Refresh))
			}
		}
		return p
	})
	// gpudra: every panel, not only the linter's graph and stat types.
	rule("panel-datasource-rule", func() (p []string) {
		for _, pn := range d.panels() {
			if !templated(pn.Datasource) {
				p = append(p, fmt.Sprintf("panel %q does not use ${datasource}", pn.Title))
			}
			for _, q := range pn.Targets {
				if q.Datasource != nil && !templated(q.Datasource) {
					p = append(p, fmt.Sprintf("panel %q, query %s does not use ${datasource}", pn.Title, q.RefID))
				}
			}
		}
		return p
	})
	rule("panel-title-description-rule", func() (p []string) {
		for _, pn := range d.panels() {
			if pn.Title == "" || pn.Description == "" {
				p = append(p, fmt.Sprintf("panel %d %q has no title or no description", pn.ID, pn.Title))
			}
		}
		return p
	})
	// gpudra: a unit on every panel, value mappings or not.
	rule("panel-units-rule", func() (p []string) {
		for _, pn := range d.panels() {
			if u := pn.unit(); !slices.Contains(validUnits, u) {
				p = append(p, fmt.Sprintf("panel %q has no or an unknown unit %q", pn.Title, u))
			}
		}
		return p
	})
	rule("panel-no-targets-rule", func() (p []string) {
		for _, pn := range d.panels() {
			if len(pn.Targets) == 0 {
				p = append(p, fmt.Sprintf("panel %q has no query", pn.Title))
			}
		}
		return p
	})
	eachQuery := func(check func(pn dashboardPanel, q dashboardQuery, e parser.Expr) []string) (p []string) {
		for _, pn := range d.panels() {
			for _, q := range pn.Targets {
				e, err := parsePromQL(q.Expr, d.Templating.List)
				if err != nil {
					continue // target-promql-rule says so
				}
				p = append(p, check(pn, q, e)...)
			}
		}
		return p
	}
	rule("target-promql-rule", func() (p []string) {
		for _, pn := range d.panels() {
			for _, q := range pn.Targets {
				if strings.TrimSpace(q.Expr) == "" {
					p = append(p, fmt.Sprintf("panel %q, query %s is empty", pn.Title, q.RefID))
				} else if _, err := parsePromQL(q.Expr, d.Templating.List); err != nil {
					p = append(p, fmt.Sprintf("panel %q, query %s: %v", pn.Title, q.RefID, err))
				}
			}
		}
		return p
	})
	rateInterval, _ := time.ParseDuration(grafanaGlobals["__rate_interval"])
	rule("target-rate-interval-rule", func() []string {
		return eachQuery(func(pn dashboardPanel, q dashboardQuery, e parser.Expr) (p []string) {
			parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
				m, ok := n.(*parser.MatrixSelector)
				if !ok || m.Range == rateInterval || len(path) == 0 {
					return nil
				}
				call, ok := path[len(path)-1].(*parser.Call)
				switch {
				case !ok:
					p = append(p, fmt.Sprintf("panel %q, query %s: range %s outside a function", pn.Title, q.RefID, m))
				case call.Func.Name == "rate" || call.Func.Name == "irate":
					p = append(p, fmt.Sprintf("panel %q, query %s: %s( ) over %s, want $__rate_interval", pn.Title, q.RefID, call.Func.Name, m))
				}
				return nil
			})
			return p
		})
	})
	matcherRule := func(label string) func() []string {
		return func() []string {
			return eachQuery(func(pn dashboardPanel, q dashboardQuery, e parser.Expr) (p []string) {
				for _, sel := range parser.ExtractSelectors(e) {
					if !slices.ContainsFunc(sel, func(m *labels.Matcher) bool {
						return m.Name == label && m.Type == labels.MatchRegexp && m.Value == label
					}) {
						p = append(p, fmt.Sprintf("panel %q, query %s: a selector without %s=~\"$%s\"", pn.Title, q.RefID, label, label))
					}
				}
				return p
			})
		}
	}
	rule("target-job-rule", matcherRule("job"))
	rule("target-instance-rule", matcherRule("instance"))
	// gpudra: by the metric's name (the linter matches the selector's text).
	rule("target-counter-agg-rule", func() []string {
		return eachQuery(func(pn dashboardPanel, q dashboardQuery, e parser.Expr) (p []string) {
			parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok || !strings.HasSuffix(vs.Name, "_total") {
					return nil
				}
				ok = len(path) >= 2
				if ok {
					_, ranged := path[len(path)-1].(*parser.MatrixSelector)
					call, isCall := path[len(path)-2].(*parser.Call)
					ok = ranged && isCall && slices.Contains([]string{"rate", "irate", "increase"}, call.Func.Name)
				}
				if !ok {
					p = append(p, fmt.Sprintf("panel %q, query %s: counter %s is not in rate, irate or increase", pn.Title, q.RefID, vs.Name))
				}
				return nil
			})
			return p
		})
	})
	rule("uneditable-dashboard", func() []string {
		if d.Editable {
			return []string{"the dashboard is editable; provisioned dashboards are not"}
		}
		return nil
	})
}

// TestDashboardMap: the fleet map is a node × GPU table of
// gpudra_device_info (which the plugins export), coloured by state, and
// the node variable comes from the plugins too: both work without the
// controller.
func TestDashboardMap(t *testing.T) {
	d := loadDashboard(t)
	i := slices.IndexFunc(d.panels(), func(p dashboardPanel) bool { return strings.Contains(p.Title, "GPU map") })
	if i < 0 {
		t.Fatal("no GPU map panel")
	}
	p := d.panels()[i]
	if len(p.Targets) != 1 || !strings.Contains(p.Targets[0].Expr, "gpudra_device_info") {
		t.Errorf("the GPU map does not query gpudra_device_info: %+v", p.Targets)
	}
	matrix := slices.IndexFunc(p.Transformations, func(tr struct {
		ID      string         `json:"id"`
		Options map[string]any `json:"options"`
	}) bool {
		return tr.ID == "groupingToMatrix" && tr.Options["rowField"] == "node" && tr.Options["columnField"] == "device"
	})
	if matrix < 0 {
		t.Error("the GPU map is not a node × device matrix")
	}
	mappings := string(p.FieldConfig.Defaults.Mappings)
	for _, state := range []string{"free", "allocated", "shared", "partitioned", "unmanaged", "unhealthy"} {
		if !strings.Contains(mappings, "^"+state) {
			t.Errorf("the GPU map has no colour for %s", state)
		}
	}
	for _, v := range d.Templating.List {
		if v.Name == "node" && !strings.HasPrefix(v.query(), "label_values(gpudra_plugin_ready") {
			t.Errorf("the node variable asks %q, not the plugins' gpudra_plugin_ready", v.query())
		}
	}
}
