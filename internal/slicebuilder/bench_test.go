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

package slicebuilder

import (
	"fmt"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

// BenchmarkBuild measures one rebuild of a node's slices, which the plugin
// does at start-up, on every health change and after every prepare or
// unprepare that changes how the GPUs are held. Run with -benchmem.
//
//	go test ./internal/slicebuilder -run '^$' -bench BenchmarkBuild -benchmem
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{8, 64} {
		node := h100Node("node-a", n)
		health := map[string]gpu.Health{node.GPUs[0].UUID: gpu.Unhealthy}
		for _, sysfs := range []bool{false, true} {
			opts := Options{DriverName: testDriver, Health: health, SysfsRoot: noSysfs}
			if sysfs {
				opts.SysfsRoot = h100Sysfs(b, node)
			}
			b.Run(fmt.Sprintf("whole-gpus/gpus=%d/sysfs=%v", n, sysfs), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Build(node, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// A fake DGX H100 as the plugin discovers it (MIG, sysfs topology):
	// one spare (the default) and every GPU's placements.
	node, sysfs := fakeInventory(b, "dgx-h100")
	for _, spare := range []SpareGPUs{{}, {All: true}} {
		b.Run("dgx-h100/spares="+spare.String(), func(b *testing.B) {
			opts := Options{DriverName: testDriver, SysfsRoot: sysfs, SpareGPUs: spare}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(node, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
