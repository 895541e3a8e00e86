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

package check

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

var (
	benchOnce   sync.Once
	benchSlices []*resourceapi.ResourceSlice
	benchBuild  time.Duration
	benchErr    error
)

// benchInventory is 1000 dgx-h100 nodes from gpudra's slice builder.
func benchInventory(b *testing.B) []*resourceapi.ResourceSlice {
	benchOnce.Do(func() {
		start := time.Now()
		benchSlices, benchErr = fakenodes.Slices(context.Background(), "dgx-h100", 1000, gpu.DefaultDriverName)
		benchBuild = time.Since(start)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSlices
}

// benchTemplates are n distinct ResourceClaimTemplates of the kinds users
// write: memory thresholds, product names, compute capability, NVLink
// groups of 2, 4 or 8, firstAvailable.
func benchTemplates(n int) []byte {
	var b strings.Builder
	for i := range n {
		var req string
		switch i % 5 {
		case 0:
			req = fmt.Sprintf(`      - name: gpu
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('%dGi')) >= 0`, 10+i%70)
		case 1:
			req = fmt.Sprintf(`      - name: gpu
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA H100') && device.attributes['gpu.gpudra.io'].index >= %d`, i%8)
		case 2:
			req = fmt.Sprintf(`      - name: gpu
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: device.attributes['gpu.gpudra.io'].cudaComputeCapability.compareTo(semver('%d.0.0')) >= 0`, 7+i%3)
		case 3:
			req = fmt.Sprintf(`      - name: gpus
        exactly:
          deviceClassName: gpu.gpudra.io
          count: %d
          selectors:
          - cel:
              expression: device.attributes['gpu.gpudra.io'].minor >= %d
      constraints:
      - requests: [gpus]
        matchAttribute: gpu.gpudra.io/nvlinkGroup`, []int{2, 4, 8}[i%3], i/1000)
		case 4:
			req = fmt.Sprintf(`      - name: gpu
        firstAvailable:
        - name: big
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('%dGi')) >= 0
        - name: any
          deviceClassName: gpu.gpudra.io`, 100+i)
		}
		fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t%d\nspec:\n  spec:\n    devices:\n      requests:\n%s\n", i, req)
	}
	return []byte(b.String())
}

// BenchmarkCheck100Templates1000Nodes checks 100 templates against 1000
// dgx-h100 nodes: compile, evaluate on every device, allocate each.
func BenchmarkCheck100Templates1000Nodes(b *testing.B) {
	slices := benchInventory(b)
	data := benchTemplates(100)
	b.ResetTimer()
	var last *Report
	var total, cpu time.Duration
	for b.Loop() {
		in := &scheduler.Manifests{}
		if err := in.Add("templates.yaml", data); err != nil {
			b.Fatal(err)
		}
		start, cpuStart := time.Now(), cpuTime()
		rep, err := Run(context.Background(), Options{Inputs: in, Slices: slices, BuiltinClasses: true})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += cpuTime() - cpuStart
		last = rep
	}
	s := last.Stats
	perOp := total.Seconds() / float64(b.N)
	// CPU time is what to compare on a busy machine, where the wall time
	// of a run depends on what else runs.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(benchBuild.Seconds(), "inventory-build-s")
	b.ReportMetric(float64(last.Inventory.Devices), "devices")
	b.ReportMetric(float64(s.Expressions), "expressions")
	b.ReportMetric(float64(s.Evaluations), "cel-evals/op")
	b.ReportMetric(float64(s.CachedEvals), "shared-evals/op")
	b.ReportMetric(float64(s.Evaluations+s.CachedEvals)/perOp, "device-selector-pairs/s")
	b.ReportMetric(float64(s.AllocateRuns), "allocate-calls/op")
	for _, c := range last.Claims {
		if c.Allocation == nil {
			b.Fatalf("%s not allocated: %v", c.Name, c.Unsatisfiable)
		}
	}
	if last.Errors() != 0 {
		b.Fatalf("findings: %+v", last.Findings[0])
	}
}

// BenchmarkCompile measures what a cache miss costs: the API server's
// compilation of a typical selector, with cost estimation.
func BenchmarkCompile(b *testing.B) {
	i := 0
	for b.Loop() {
		c := newCompiler(featuresMust(b).CEL)
		r := c.compile(fmt.Sprintf("device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('%dGi')) >= 0 && device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA')", i))
		if r.Error != nil {
			b.Fatal(r.Error)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "compiles/s")
}

// BenchmarkEvaluate measures one selector on one device (no sharing).
func BenchmarkEvaluate(b *testing.B) {
	slices := benchInventory(b)
	c := newCompiler(featuresMust(b).CEL)
	r := c.compile("device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0 && device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA')")
	inv := newInventory(slices[:8], scheduler.NodesOf(slices[:8]))
	d := inv.devices[0]
	for b.Loop() {
		if _, _, err := r.DeviceMatches(context.Background(), d.input); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
}

func featuresMust(b *testing.B) scheduler.Features {
	return scheduler.DefaultFeatures()
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
