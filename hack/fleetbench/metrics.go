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

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// schedulerMetrics reads kube-scheduler's own /metrics: the histograms the
// benchmark reports come from the scheduler, not from the benchmark's
// clock.
type schedulerMetrics struct {
	url    string
	client *http.Client
}

// newSchedulerMetrics authenticates with the client certificate of cfg
// (the admin's, which the scheduler's delegated authorization allows). The
// scheduler's serving certificate is self-signed, on 127.0.0.1.
func newSchedulerMetrics(cfg *rest.Config, url string) (*schedulerMetrics, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.InsecureSkipVerify = true //nolint:gosec // the scheduler's own self-signed cert on 127.0.0.1
	tlsCfg.RootCAs = nil
	return &schedulerMetrics{url: url, client: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}}, nil
}

// histogram is a cumulative histogram summed over the series selected.
type histogram struct {
	bounds []float64 // upper bounds, ascending, without +Inf
	counts []float64 // cumulative counts per bound
	count  float64
	sum    float64
}

// scrape is one reading of the scheduler's metrics.
type scrape map[string]*dto.MetricFamily

func (m *schedulerMetrics) scrape(ctx context.Context) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", m.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", m.url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// histogram sums the histogram series of the family whose labels include
// every pair in match.
func (s scrape) histogram(family string, match map[string]string) histogram {
	var h histogram
	mf := s[family]
	if mf == nil {
		return h
	}
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, match) || m.GetHistogram() == nil {
			continue
		}
		hist := m.GetHistogram()
		if h.bounds == nil {
			for _, b := range hist.GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					h.bounds = append(h.bounds, b.GetUpperBound())
				}
			}
			h.counts = make([]float64, len(h.bounds))
		}
		for i, b := range hist.GetBucket() {
			if i < len(h.counts) {
				h.counts[i] += float64(b.GetCumulativeCount())
			}
		}
		h.count += float64(hist.GetSampleCount())
		h.sum += hist.GetSampleSum()
	}
	return h
}

// counter sums the counter series of the family whose labels match.
func (s scrape) counter(family string, match map[string]string) float64 {
	var v float64
	if mf := s[family]; mf != nil {
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, match) && m.GetCounter() != nil {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if want, ok := match[l.GetName()]; ok {
			if l.GetValue() != want {
				return false
			}
			found++
		}
	}
	return found == len(match)
}

// minus is the histogram of what was observed between two readings.
func (h histogram) minus(before histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - before.count, sum: h.sum - before.sum}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

// quantile estimates the q-quantile the way Prometheus' histogram_quantile
// does: linear interpolation inside the bucket that holds it. The answer
// is only as fine as the buckets (the scheduler's double from one to the
// next); an observation above the last bound reports that bound.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= rank })
	if i == len(h.counts) {
		return h.bounds[len(h.bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	inBucket := h.counts[i] - below
	if inBucket <= 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/inBucket
}

// processMemory is a process's resident memory now and at its peak, in
// MiB, from /proc/<pid>/status.
func processMemory(pid int) (rss, peak float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		if key == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak, sc.Err()
}

// loadAverage is the 1-minute load average.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in
// /proc/<pid>/stat: 100 on every Linux architecture gpudra builds for.
const clockTicks = 100

// processCPU is the CPU time (user and system) the process has used, in
// seconds.
func processCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// plain numbers: state, ppid, ..., utime (14) and stime (15).
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks float64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return ticks / clockTicks, nil
}
