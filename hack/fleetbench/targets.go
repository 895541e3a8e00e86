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
	"fmt"
	"math"
	"strings"
)

// Targets from the issues that asked for the benchmark (17): at 1000
// nodes and above, gpudra's default layout schedules whole-GPU and 8-GPU
// pods at least targetVsWhole of the whole-GPUs-only layout's rate, and
// 1g.10gb pods at targetMIGPodsPerSecond; at 500 nodes, whole-GPU pods on
// an empty fleet within targetVsWhole, beside upstream's CI floor, and at
// most targetCPUVsWhole of the scheduler's CPU per pod; the API server at
// 1000 nodes at most targetMemoryVsWhole of its memory with whole GPUs
// only; at most targetProtoKBPerNode of protobuf per node at rest.
const (
	targetVsWhole          = 0.8
	targetMIGPodsPerSecond = 20
	targetCPUVsWhole       = 1.3
	targetMemoryVsWhole    = 1.5
	targetProtoKBPerNode   = 60
	upstreamFloor          = 40
)

// targets checks the figures issue 17 asks for, cell by cell.
func (r report) targets(b *strings.Builder) {
	b.WriteString("\n### Targets\n\n")
	b.WriteString("| figure | nodes | fleet | measured | target | |\n|---|--:|---|--:|---|---|\n")
	row := func(what string, n int, st, measured, target string, met bool, ok bool) {
		v := "**missed**"
		switch {
		case !ok:
			v, measured = "not measured", "—"
		case met:
			v = "met"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", what, n, st, measured, target, v)
	}
	vsWhole := func(n int, wl, st string) (float64, bool) {
		g, okG := r.cell(n, layoutGpudra, wl, st)
		w, okW := r.cell(n, layoutWhole, wl, st)
		if !okG || !okW || w.PodsPerSecond == 0 || g.Scheduled == 0 {
			return math.NaN(), false
		}
		return g.PodsPerSecond / w.PodsPerSecond, true
	}
	for _, n := range r.sizes() {
		if n < 1000 {
			continue
		}
		for _, wl := range []string{"gpu1", "gpu8"} {
			w, _ := workloadByName(wl)
			for _, st := range states {
				v, ok := vsWhole(n, wl, st)
				row(w.title+": gpudra ÷ whole GPUs, pods/s", n, st, fmtRatio(v), fmt.Sprintf("≥ %g×", targetVsWhole), v >= targetVsWhole, ok)
			}
		}
		for _, st := range states {
			c, ok := r.cell(n, layoutGpudra, "mig1g", st)
			ok = ok && c.Skipped == "" && c.Scheduled > 0
			row("1g.10gb MIG pods/s, gpudra", n, st, fmt.Sprintf("%.1f", c.PodsPerSecond), fmt.Sprintf("≥ %d", targetMIGPodsPerSecond), c.PodsPerSecond >= targetMIGPodsPerSecond, ok)
		}
	}
	if _, ok := r.run(500, layoutGpudra); ok {
		v, ok := vsWhole(500, "gpu1", "empty")
		row("1 whole GPU: gpudra ÷ whole GPUs, pods/s", 500, "empty", fmtRatio(v), fmt.Sprintf("≥ %g×", targetVsWhole), v >= targetVsWhole, ok)
		g, okG := r.cell(500, layoutGpudra, "gpu1", "empty")
		w, okW := r.cell(500, layoutWhole, "gpu1", "empty")
		ok = okG && okW && g.CPUMsPerPod > 0 && w.CPUMsPerPod > 0
		cpu := math.NaN()
		if ok {
			cpu = g.CPUMsPerPod / w.CPUMsPerPod
		}
		row("1 whole GPU: scheduler CPU per pod, gpudra ÷ whole GPUs", 500, "empty", fmtRatio(cpu), fmt.Sprintf("≤ %g×", targetCPUVsWhole), cpu <= targetCPUVsWhole, ok)
		row("1 whole GPU: gpudra pods/s beside upstream's CI floor", 500, "empty", fmt.Sprintf("%.1f (whole GPUs %.1f)", g.PodsPerSecond, w.PodsPerSecond), fmt.Sprintf("≥ %d (scheduler_perf, ~10 devices per node)", upstreamFloor), g.PodsPerSecond >= upstreamFloor, okG && okW)
	}
	g, okG := r.run(1000, layoutGpudra)
	w, okW := r.run(1000, layoutWhole)
	mem := math.NaN()
	if okG && okW && w.APIServerRSSMiB > 0 {
		mem = g.APIServerRSSMiB / w.APIServerRSSMiB
	}
	row("API server memory, gpudra ÷ whole GPUs", 1000, "at rest", fmtRatio(mem), fmt.Sprintf("≤ %g×", targetMemoryVsWhole), mem <= targetMemoryVsWhole, okG && okW)
	for _, n := range r.sizes() {
		if run, ok := r.run(n, layoutGpudra); ok && run.Publish.ProtoBytes > 0 {
			kb := float64(run.Publish.ProtoBytes) / 1000 / float64(run.Nodes)
			row("gpudra's slices per 8-GPU node, protobuf", n, "at rest", fmt.Sprintf("%.1f KB", kb), fmt.Sprintf("≤ %d KB", targetProtoKBPerNode), kb <= targetProtoKBPerNode, true)
			break
		}
	}
	b.WriteString("\n")
}
