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
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSamples(t *testing.T) {
	reg := prometheus.NewRegistry()
	gpus := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpus"}, []string{"node", "state"})
	reqs := prometheus.NewCounter(prometheus.CounterOpts{Name: "requests_total"})
	dur := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "duration_seconds"})
	reg.MustRegister(gpus, reqs, dur)
	gpus.WithLabelValues("a", "free").Set(3)
	gpus.WithLabelValues("a", "whole").Set(1)
	gpus.WithLabelValues("b", "free").Set(2)
	gpus.WithLabelValues("c", "").Set(7)
	reqs.Add(5)
	dur.Observe(0.5)
	dur.Observe(1.5)

	gathered := Gather(t, reg)
	text := `# TYPE gpus gauge
gpus{node="a",state="free"} 3
gpus{node="a",state="whole"} 1
gpus{node="b",state="free"} 2
gpus{node="c",state=""} 7
# TYPE requests_total counter
requests_total 5
# TYPE duration_seconds histogram
duration_seconds_bucket{le="+Inf"} 2
duration_seconds_sum 2
duration_seconds_count 2
`
	parsed, err := ParseText([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Samples{"gathered": gathered, "parsed": parsed} {
		t.Run(name, func(t *testing.T) {
			if v := s[`gpus{node="a",state="free"}`]; v != 3 {
				t.Errorf("by key: %v", v)
			}
			if v, ok := s.Value(t, "gpus", "node=b"); !ok || v != 2 {
				t.Errorf("Value(node=b) = %v, %v", v, ok)
			}
			if v, ok := s.Value(t, "gpus", `node="a"`, "state=whole"); !ok || v != 1 {
				t.Errorf(`Value(node="a", state=whole) = %v, %v`, v, ok)
			}
			if _, ok := s.Value(t, "gpus", "node=d"); ok {
				t.Error("Value(node=d) found a series")
			}
			if v, ok := s.Value(t, "gpus", "state="); !ok || v != 7 {
				t.Errorf("Value(state=) = %v, %v; want the series with an empty state", v, ok)
			}
			if v := s.Sum("gpus", "state=free"); v != 5 {
				t.Errorf("Sum(state=free) = %v", v)
			}
			if v := s.Sum("gpus"); v != 13 {
				t.Errorf("Sum() = %v", v)
			}
			if s["requests_total"] != 5 || s["duration_seconds_count"] != 2 || s["duration_seconds_sum"] != 2 {
				t.Errorf("counter and histogram: %v", s)
			}
		})
	}
}
