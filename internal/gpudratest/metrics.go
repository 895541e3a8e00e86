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

package gpudratest

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples are the series of a registry or a scrape, by series: the
// metric's name and its labels sorted by name, with quoted values, as in
// the exposition format: `gpudra_gpus{node="node-1",state="free"}`; a
// series without labels is its bare name. A histogram adds its
// <name>_count and <name>_sum series; a counter or gauge its value.
type Samples map[string]float64

// Gather collects a registry's samples, as the tests of a component see
// what it exports without an HTTP server.
func Gather(t testing.TB, g prometheus.Gatherer) Samples {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return samplesOf(families)
}

// ParseText parses a scrape of /metrics (the text exposition format), with
// the parser client_golang's testutil uses.
func ParseText(text []byte) (Samples, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	list := make([]*dto.MetricFamily, 0, len(families))
	for _, f := range families {
		list = append(list, f)
	}
	return samplesOf(list), nil
}

func samplesOf(families []*dto.MetricFamily) Samples {
	out := Samples{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				out[Series(f.GetName(), labels)] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[Series(f.GetName(), labels)] = m.GetCounter().GetValue()
			case m.Untyped != nil:
				out[Series(f.GetName(), labels)] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				out[Series(f.GetName()+"_count", labels)] = float64(m.GetHistogram().GetSampleCount())
				out[Series(f.GetName()+"_sum", labels)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// Series is the key of a series in Samples.
func Series(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Value is the value of the one series of name whose labels include all
// of labels, each "label=value" (the value may be quoted, `label="value"`;
// "label=" matches a label that is empty or absent). ok is false when no
// series matches; more than one fails the test.
func (s Samples) Value(t testing.TB, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	hits := s.matching(name, labels)
	if len(hits) > 1 {
		t.Fatalf("%d series of %s match %v: %v", len(hits), name, labels, hits)
	}
	if len(hits) == 0 {
		return 0, false
	}
	return s[hits[0]], true
}

// Sum adds up every series of name whose labels include all of labels (as
// in Value).
func (s Samples) Sum(name string, labels ...string) float64 {
	total := 0.0
	for _, k := range s.matching(name, labels) {
		total += s[k]
	}
	return total
}

func (s Samples) matching(name string, want []string) []string {
	var hits []string
	for key := range s {
		n, labels, ok := parseSeries(key)
		if !ok || n != name {
			continue
		}
		match := true
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			match = match && labels[k] == v
		}
		if match {
			hits = append(hits, key)
		}
	}
	slices.Sort(hits)
	return hits
}

// parseSeries splits a Series key into the metric's name and labels.
func parseSeries(key string) (name string, labels map[string]string, ok bool) {
	name, rest, found := strings.Cut(key, "{")
	labels = map[string]string{}
	if !found {
		return name, labels, true
	}
	for rest != "}" {
		k, after, found := strings.Cut(rest, "=")
		if !found {
			return "", nil, false
		}
		quoted, err := strconv.QuotedPrefix(after)
		if err != nil {
			return "", nil, false
		}
		labels[k], _ = strconv.Unquote(quoted)
		rest = strings.TrimPrefix(after[len(quoted):], ",")
	}
	return name, labels, true
}
