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

// Package chart holds the tests of the Helm chart that need no helm:
// its values schema and its Grafana dashboard. hack/chart-check.sh
// renders the chart; hack/promtool tests its alert rules.
package chart

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// stringSchema is what the tests read of a string definition.
type stringSchema struct {
	Pattern   string `json:"pattern"`
	MinLength int    `json:"minLength"`
	Not       *struct {
		Pattern string `json:"pattern"`
	} `json:"not"`
}

// schemaDefinitions reads the named definitions of values.schema.json.
func schemaDefinitions(t *testing.T) map[string]stringSchema {
	t.Helper()
	raw, err := os.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Definitions map[string]stringSchema `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return schema.Definitions
}

// durationCandidates are strings a user might set, valid and not.
var durationCandidates = []string{
	"0", "", "0s", "0h0m", "1s", "30s", "10m", "30m", "1h", "1h30m", "1h30m15s", "1h0m0s", "90m", "2d", "1w", "1y", "1y2w3d4h5m6s7ms",
	"500ms", "1m500ms", "1.5h", "0.5m", "1h1h", "30m1h", "1s1m", "1d12h", "1us", "5ns", "-1s", "1H", "1 h", "h", "ms", "1", "10",
	"forever", "1m30", "01m", "1ms1s",
}

// TestSchemaDurationsArePrometheusDurations: the schema's Prometheus
// duration accepts exactly what Prometheus' own parser accepts (a value
// the chart puts into an alert rule's "for" or a ServiceMonitor's
// interval), and the duration both the plugin and Prometheus read
// accepts only what both parsers accept, and nothing zero.
func TestSchemaDurationsArePrometheusDurations(t *testing.T) {
	defs := schemaDefinitions(t)
	accepts := func(name, s string) bool {
		d, ok := defs[name]
		if !ok || d.Pattern == "" {
			t.Fatalf("values.schema.json has no definition %s with a pattern", name)
		}
		ok = len(s) >= d.MinLength && regexp.MustCompile(d.Pattern).MatchString(s)
		if d.Not != nil && regexp.MustCompile(d.Not.Pattern).MatchString(s) {
			ok = false
		}
		return ok
	}
	for _, s := range durationCandidates {
		prom, promErr := model.ParseDuration(s)
		goDur, goErr := time.ParseDuration(s)
		if got, want := accepts("prometheusDuration", s), promErr == nil; got != want {
			t.Errorf("prometheusDuration accepts %q: %v, Prometheus' parser: %v (%v)", s, got, want, promErr)
		}
		want := promErr == nil && goErr == nil && prom > 0 && goDur > 0
		if got := accepts("positivePrometheusGoDuration", s); got != want {
			t.Errorf("positivePrometheusGoDuration accepts %q: %v, want %v (Prometheus: %v, Go: %v)", s, got, want, promErr, goErr)
		}
		if accepts("duration", s) && goErr != nil {
			t.Errorf("duration accepts %q, which Go's time.ParseDuration refuses: %v", s, goErr)
		}
	}
}
