//go:build chart

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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// ruleGroups is a Prometheus rules file: what a PrometheusRule's spec
// holds.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// text is every rule's alert, expression and for, one per line, to look
// for strings in (the marshalled YAML wraps long lines).
func (g ruleGroups) text() string {
	var b strings.Builder
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			b.WriteString(r.Alert + "\n" + r.Expr + "\nfor: " + r.For + "\n")
		}
	}
	return b.String()
}

func (g ruleGroups) alerts() []string {
	var out []string
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			out = append(out, r.Alert)
		}
	}
	return out
}

// renderedRules renders the chart's PrometheusRule with the values and
// returns its spec: the rules file Prometheus gets from the operator.
func renderedRules(t *testing.T, args ...string) ([]byte, ruleGroups) {
	t.Helper()
	args = append([]string{"--set", "metrics.prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"}, args...)
	rules := ofKind(objects(t, render(t, args...)), "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	var spec any
	for _, r := range rules {
		spec = r["spec"]
	}
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var groups ruleGroups
	if err := yaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	return raw, groups
}

// TestAlertRules runs promtool's rule checker and unit tests
// (testdata/promtool/*_test.yaml) over the rules exactly as the chart
// renders them by default, and requires of the tests one case where each
// alert fires and one where it stays quiet.
func TestAlertRules(t *testing.T) {
	raw, groups := renderedRules(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yaml"), raw)
	tests := copyTestdata(t, dir)
	promtool(t, dir, "check", "rules", "rules.yaml")
	promtool(t, dir, append([]string{"test", "rules"}, tests...)...)

	// Each alert: a case that fires and one that does not.
	type cases struct{ firing, quiet int }
	seen := map[string]*cases{}
	for _, a := range groups.alerts() {
		seen[a] = &cases{}
	}
	for _, f := range tests {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(raw, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range file.Tests {
			for _, a := range tc.AlertRuleTest {
				c, ok := seen[a.Alertname]
				if !ok {
					t.Errorf("%s tests alert %s, which the chart does not render", f, a.Alertname)
					continue
				}
				if len(a.ExpAlerts) > 0 {
					c.firing++
				} else {
					c.quiet++
				}
			}
		}
	}
	for a, c := range seen {
		if c.firing == 0 || c.quiet == 0 {
			t.Errorf("alert %s has %d firing and %d quiet cases in testdata/promtool; want at least one of each", a, c.firing, c.quiet)
		}
	}
}

// runbookBase is where every alert's runbook_url points: the
// troubleshooting page on the project's forge, one section per alert.
const runbookBase = "https://github.com/gpudra/gpudra/blob/main/docs/troubleshooting.md#"

// TestAlertsHaveRunbooks: every alert the chart renders carries a
// runbook_url annotation naming its own section of docs/troubleshooting.md
// (the alert's name, lowercased: the anchor GitHub gives a heading that is
// the alert's name), so that whoever is paged lands on what to do.
func TestAlertsHaveRunbooks(t *testing.T) {
	_, groups := renderedRules(t)
	n := 0
	for _, grp := range groups.Groups {
		for _, r := range grp.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if got, want := r.Annotations["runbook_url"], runbookBase+strings.ToLower(r.Alert); got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("the chart renders no alert")
	}
}

// TestRunbookAnchorsExist: each alert's runbook section exists in
// docs/troubleshooting.md, as a heading GitHub gives that anchor or an
// explicit <a id="…">.
func TestRunbookAnchorsExist(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "troubleshooting.md"))
	if os.IsNotExist(err) {
		t.Skip("docs/troubleshooting.md does not exist yet: the alerts' runbook_url sections cannot be checked")
	}
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(page), "\n") {
		if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") {
			anchors[githubAnchor(h)] = true
		}
		for _, m := range anchorID.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
	}
	_, groups := renderedRules(t)
	for _, a := range groups.alerts() {
		if !anchors[strings.ToLower(a)] {
			t.Errorf("docs/troubleshooting.md has no section #%s for alert %s (a heading \"## %s\" or <a id=\"%s\"></a>)", strings.ToLower(a), a, a, strings.ToLower(a))
		}
	}
}

var anchorID = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// githubAnchor is the anchor GitHub gives a Markdown heading: lowercased,
// punctuation other than hyphens dropped, spaces turned into hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAlertRuleValues: the values that shape the rules do, and every
// combination promtool accepts.
func TestAlertRuleValues(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		has, lacks []string
	}{
		{name: "defaults", has: []string{
			`up{job="gpudra-kubelet-plugin-metrics", namespace="gpudra"}`,
			`kube_daemonset_status_number_unavailable{namespace="gpudra", daemonset=~"gpudra-kubelet-plugin"}`,
			"GPUDRAControllerNoLeader", "GPUDRAWebhookCertificateExpiring"}},
		{name: "own scrape config, no kube-state-metrics", args: []string{"--set-string", `metrics.prometheusRule.pluginTargets=job="gpu-plugins"`,
			"--set", "metrics.prometheusRule.kubeStateMetrics=false"},
			has: []string{`up{job="gpu-plugins"}`}, lacks: []string{"GPUDRAPluginUnavailable", "kube_daemonset"}},
		{name: "node pools", args: []string{"--set", "nodePools[0].name=a100", "--set-string", "nodePools[0].kubeletPlugin.nodeSelector.pool=a100",
			"--set", "nodePools[1].name=h100", "--set-string", "nodePools[1].kubeletPlugin.nodeSelector.pool=h100"},
			has: []string{`daemonset=~"gpudra-kubelet-plugin-a100|gpudra-kubelet-plugin-h100"`}},
		{name: "durations Prometheus reads", args: []string{"--set", "metrics.idleAfter=1h30m", "--set", "metrics.prometheusRule.strandedFor=2d"},
			has: []string{"for: 1h30m", "for: 2d"}},
		{name: "no controller", args: []string{"--set", "controller.enabled=false"},
			lacks: []string{"GPUDRAControllerNoLeader", "GPUDRAWebhookCertificateExpiring", "GPUDRAAdmissionErrors"}},
		{name: "no webhook", args: []string{"--set", "admissionWebhook.enabled=false"},
			has: []string{"GPUDRAControllerNoLeader"}, lacks: []string{"GPUDRAWebhookCertificateExpiring", "GPUDRAAdmissionErrors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, groups := renderedRules(t, tc.args...)
			text := groups.text()
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("rules lack %s:\n%s", s, text)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(text, s) {
					t.Errorf("rules have %s", s)
				}
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "rules.yaml"), raw)
			promtool(t, dir, "check", "rules", "rules.yaml")
		})
	}
}

// TestSchemaRefusesWhatPrometheusRefuses: a duration Prometheus would
// reject in an alert rule or a ServiceMonitor never gets that far.
func TestSchemaRefusesWhatPrometheusRefuses(t *testing.T) {
	for _, bad := range []string{"metrics.idleAfter=1.5h", "metrics.idleAfter=1d", "metrics.idleAfter=0", "metrics.idleAfter=30m1h",
		"metrics.prometheusRule.strandedFor=1.5h", "metrics.prometheusRule.strandedFor=30", "metrics.serviceMonitor.interval=0.5m",
		`metrics.prometheusRule.pluginTargets=job=plugins`} {
		_, err := renderErr(t, "--set-string", bad, "--set", "metrics.prometheusRule.enabled=true")
		if err == nil {
			t.Errorf("the schema accepts %s", bad)
		} else if !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s is refused, but not by the schema: %v", bad, err)
		}
	}
}

// TestDCGMJoins evaluates the DCGM exporter joins of the docs
// (testdata/dcgm/dcgm_test.yaml) with promtool over real dcgm-exporter
// series (testdata/dcgm/dcgm-exporter-a800.prom), each added to every test
// as a constant series.
func TestDCGMJoins(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("testdata/dcgm/dcgm_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var dcgm []any
	for _, s := range fixtureSeries(t) {
		dcgm = append(dcgm, map[string]any{"series": s.labels, "values": s.value + "x90"})
	}
	tests, _ := file["tests"].([]any)
	for _, tc := range tests {
		m := tc.(map[string]any)
		in, _ := m["input_series"].([]any)
		m["input_series"] = append(in, dcgm...)
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "dcgm_test.yaml"), out)
	rules, err := os.ReadFile("testdata/dcgm/idle-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "idle-rules.yaml"), rules)
	promtool(t, dir, "check", "rules", "idle-rules.yaml")
	promtool(t, dir, "test", "rules", "dcgm_test.yaml")
}

// TestDashboardQueries: every query of the dashboard is PromQL that
// promtool accepts, and the GPU map, evaluated over the gpudra_device_info
// of the DCGM tests' node, shows each GPU's state and holder.
func TestDashboardQueries(t *testing.T) {
	d := loadDashboard(t)
	dir := t.TempDir()
	// Grafana's variables as a query would see them: every node, every
	// model, a minute's rate interval.
	forPrometheus := strings.NewReplacer(`"$node"`, `".+"`, `"$model"`, `".+"`, "$__rate_interval", "1m")
	var rules []map[string]any
	var mapQuery string
	for _, p := range d.panels() {
		for _, q := range p.Targets {
			expr := forPrometheus.Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q, query %s: a variable the test does not know: %s", p.Title, q.RefID, expr)
			}
			rules = append(rules, map[string]any{"record": fmt.Sprintf("dashboard:panel_%d:%s", p.ID, strings.ToLower(q.RefID)), "expr": expr})
			if strings.Contains(p.Title, "GPU map") {
				mapQuery = expr
			}
		}
	}
	raw, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "dashboard.yaml"), raw)
	promtool(t, dir, "check", "rules", "dashboard.yaml")

	// The node of testdata/dcgm: GPU 0 partitioned, GPU 1 held whole, GPU 2 free.
	rawTests, err := os.ReadFile("testdata/dcgm/dcgm_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dcgm struct {
		Tests []struct {
			InputSeries []map[string]any `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(rawTests, &dcgm); err != nil {
		t.Fatal(err)
	}
	cell := func(device, cell string) map[string]any {
		return map[string]any{"labels": fmt.Sprintf(`{node="a800-1", device=%q, cell=%q}`, device, cell), "value": 1}
	}
	test := map[string]any{"evaluation_interval": "1m", "tests": []any{map[string]any{
		"interval":     "1m",
		"input_series": dcgm.Tests[0].InputSeries,
		"promql_expr_test": []any{map[string]any{"expr": mapQuery, "eval_time": "5m", "exp_samples": []any{
			cell("gpu-0", "partitioned"), cell("gpu-1", "allocated train/llm llm-trainer-0"), cell("gpu-2", "free")}}},
	}}}
	raw, err = yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "map_test.yaml"), raw)
	promtool(t, dir, "test", "rules", "map_test.yaml")
}
