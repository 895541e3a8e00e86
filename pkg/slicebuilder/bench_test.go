package slicebuilder

import (
	"fmt"
	"testing"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// BenchmarkBuild measures one rebuild of a node's slices, which the plugin
// does at start-up and on every health change. Run with -benchmem.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{8, 64} {
		node := h100Node("node-a", n)
		health := map[string]gpu.Health{node.GPUs[0].UUID: gpu.Unhealthy}
		for _, sysfs := range []bool{false, true} {
			opts := Options{DriverName: testDriver, Health: health, SysfsRoot: noSysfs}
			if sysfs {
				opts.SysfsRoot = h100Sysfs(b, node)
			}
			b.Run(fmt.Sprintf("gpus=%d/sysfs=%v", n, sysfs), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Build(node, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
