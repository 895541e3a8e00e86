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

// Package metricdoc describes Prometheus metrics once, for both the code
// that exports them and the documentation that lists them: each component
// builds its instruments from its []Metric, and a test renders the same
// list into docs/observability.md, so the docs cannot drift from what is
// exported.
package metricdoc

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Type is a Prometheus metric type.
type Type string

const (
	Gauge     Type = "gauge"
	Counter   Type = "counter"
	Histogram Type = "histogram"
)

// Metric is one metric: what it is called, what kind it is, its labels and
// its help text.
type Metric struct {
	Name   string
	Type   Type
	Labels []string
	Help   string
}

// Desc is the metric's descriptor, for a collector's const metrics.
func (m Metric) Desc() *prometheus.Desc {
	return prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
}

// CounterVec, GaugeVec and HistogramVec build the metric's instrument.
func (m Metric) CounterVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

func (m Metric) Counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: m.Name, Help: m.Help})
}

func (m Metric) Gauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help})
}

func (m Metric) HistogramVec(buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: buckets}, m.Labels)
}

func (m Metric) Histogram(buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: buckets})
}

// Table renders metrics as a Markdown table, in the order given. extra are
// labels every series carries besides its own (the plugin's node).
func Table(metrics []Metric, extra ...string) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n| --- | --- | --- | --- |\n")
	for _, m := range metrics {
		labels := append(append([]string(nil), extra...), m.Labels...)
		for i, l := range labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "),
			strings.ReplaceAll(m.Help, "|", `\|`))
	}
	return b.String()
}

func (m Metric) GaugeVec() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
}
