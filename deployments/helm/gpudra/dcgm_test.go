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
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fixtureLine is one series of the dcgm-exporter fixture.
type fixtureLine struct{ labels, value string }

var seriesLine = regexp.MustCompile(`^([A-Za-z_:][A-Za-z0-9_:]*\{.*\}) (\S+)$`)

// fixtureSeries reads testdata/dcgm/dcgm-exporter-a800.prom.
func fixtureSeries(t *testing.T) []fixtureLine {
	t.Helper()
	raw, err := os.ReadFile("testdata/dcgm/dcgm-exporter-a800.prom")
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtureLine
	for _, l := range strings.Split(string(raw), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := seriesLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("the fixture has a line that is no series: %q", l)
		}
		out = append(out, fixtureLine{labels: m[1], value: m[2]})
	}
	return out
}

// TestDCGMDocs: the queries and the idle alert that docs/observability.md
// shows are the ones promtool evaluates over the DCGM fixture, and the
// fixture has the labels they join on, for whole GPUs and MIG devices.
func TestDCGMDocs(t *testing.T) {
	docs, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/dcgm/dcgm_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			PromQLExprTest []struct {
				Expr string `json:"expr"`
			} `json:"promql_expr_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tc := range file.Tests {
		for _, e := range tc.PromQLExprTest {
			n++
			if !strings.Contains(string(docs), strings.TrimSpace(e.Expr)) {
				t.Errorf("docs/observability.md does not show the query promtool tests:\n%s", e.Expr)
			}
		}
	}
	if n < 3 {
		t.Errorf("%d DCGM queries tested, want utilization, GPU utilization and memory per pod", n)
	}
	rules, err := os.ReadFile("testdata/dcgm/idle-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), string(rules)) {
		t.Errorf("docs/observability.md does not show testdata/dcgm/idle-rules.yaml as it is tested")
	}
	var whole, mig bool
	for _, s := range fixtureSeries(t) {
		if !strings.Contains(s.labels, `UUID="GPU-`) {
			t.Errorf("a DCGM series without the GPU's UUID: %s", s.labels)
		}
		if strings.Contains(s.labels, `GPU_I_ID="`) {
			mig = true
		} else {
			whole = true
		}
	}
	if !whole || !mig {
		t.Errorf("the fixture has whole GPUs %v and MIG devices %v; want both", whole, mig)
	}
}
