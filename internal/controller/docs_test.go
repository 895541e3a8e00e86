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

package controller

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/componentmetrics"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/metricdoc"
	"github.com/gpudra/gpudra/internal/plugin"
)

const (
	metricDocsBegin = "<!-- BEGIN GENERATED: go test ./internal/controller -run TestMetricDocs -update -->\n"
	metricDocsEnd   = "<!-- END GENERATED -->\n"
	observability   = "../../docs/observability.md"
)

// TestMetricDocs keeps the metric tables of docs/observability.md equal to
// what the controller and the plugin export: every name, type, label and
// help text.
func TestMetricDocs(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("\n### gpudra-controller (fleet metrics from the controller's leader, admission metrics from the webhook's replicas)\n\n")
	buf.WriteString(metricdoc.Table(Metrics))
	buf.WriteString("\n### gpudra-kubelet-plugin (every node)\n\n")
	buf.WriteString(metricdoc.Table(plugin.Metrics, "node"))
	buf.WriteString("\n### Both\n\n")
	buf.WriteString(metricdoc.Table(componentmetrics.Metrics))
	buf.WriteString("\n")
	gpudratest.GoldenRewrite(t, filepath.FromSlash(observability), func(doc []byte) []byte {
		return gpudratest.ReplaceSection(t, doc, metricDocsBegin, metricDocsEnd, buf.Bytes())
	})
}

// TestChartQueriesUseExportedMetrics: every gpudra_ metric the chart's
// alerts and dashboard query is one the controller or the plugin exports
// (histograms with their _bucket, _sum and _count series), so a renamed
// metric cannot leave an alert that never fires.
func TestChartQueriesUseExportedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, m := range slices.Concat(Metrics, plugin.Metrics, componentmetrics.Metrics) {
		known[m.Name] = true
		if m.Type == metricdoc.Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Name+s] = true
			}
		}
	}
	files := []string{
		"../../deployments/helm/gpudra/templates/prometheusrule.yaml",
		"../../deployments/helm/gpudra/files/dashboards/gpudra.json",
	}
	name := regexp.MustCompile(`gpudra_[a-z_]+`)
	for _, f := range files {
		raw, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, n := range name.FindAllString(string(raw), -1) {
			if strings.HasSuffix(n, "_") {
				continue
			}
			used++
			if !known[n] {
				t.Errorf("%s queries %s, which nothing exports", f, n)
			}
		}
		if used == 0 {
			t.Errorf("%s queries no gpudra metric", f)
		}
	}
}

// TestDashboardVariablesWithoutController: the dashboard's variables ask
// the plugins' metrics, so that they list nodes and models where no
// controller runs (controller.enabled=false) or before its leader exports.
func TestDashboardVariablesWithoutController(t *testing.T) {
	raw, err := os.ReadFile(filepath.FromSlash("../../deployments/helm/gpudra/files/dashboards/gpudra.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	plugins := map[string]bool{}
	for _, m := range plugin.Metrics {
		plugins[m.Name] = true
	}
	name := regexp.MustCompile(`gpudra_[a-z_]+`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		used := name.FindAllString(v.Definition, -1)
		if len(used) == 0 {
			t.Errorf("variable %s asks no gpudra metric: %q", v.Name, v.Definition)
		}
		for _, n := range used {
			if !plugins[n] {
				t.Errorf("variable %s asks %s, which the plugins do not export (it would be empty without the controller)", v.Name, n)
			}
		}
	}
}
