package slicebuilder

import (
	"fmt"
	"testing"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// BenchmarkBuild measures one rebuild of a node's slices, which the plugin
// does at start-up, on every health change and after every prepare or
// unprepare that changes how the GPUs are held. Run with -benchmem.
//
//	go test ./pkg/slicebuilder -run '^$' -bench BenchmarkBuild -benchmem
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
