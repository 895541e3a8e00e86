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

package simulate

import (
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// migChoices are the --mig-profiles settings docs/mig.md has figures for,
// on an 8×H100 node: every profile, a typical three (the smallest, half
// and whole GPU), none.
var migChoices = []struct{ name, flag string }{
	{"all", "all"},
	{"three", "1g.10gb,3g.40gb,7g.80gb"},
	{"none", "none"},
}

// migChoiceCluster is one busy 8×H100 node (7 whole GPUs taken) published
// with the MIG profile choice, and its slices' size.
func migChoiceCluster(tb testing.TB, flag string) (c *allocCluster, devices, protoBytes int) {
	tb.Helper()
	choice, err := slicebuilder.ParseMigProfiles(flag)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := slicebuilder.Build(h100Inventory(tb), slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent", MigProfiles: choice})
	if err != nil {
		tb.Fatal(err)
	}
	c = newAllocClusterFrom(tb, res.Pools["node-0"].Slices, 1, 7)
	for _, s := range c.slices {
		devices += len(s.Spec.Devices)
		b, err := s.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		protoBytes += len(b)
	}
	return c, devices, protoBytes
}

// BenchmarkMigProfileChoice is what --mig-profiles saves: per choice, the
// node's devices and slice bytes, and per claim one Filter call's time and
// allocations on a busy node (incubating allocator).
//
//	go test ./internal/simulate -run '^$' -bench BenchmarkMigProfileChoice -benchmem
func BenchmarkMigProfileChoice(b *testing.B) {
	claims := map[string]*resourceapi.ResourceClaim{
		"gpu1":      gpu1Claim(),
		"mig1g10gb": benchClaim("mig-1g.10gb.gpudra.io"),
	}
	for _, choice := range migChoices {
		c, devices, bytes := migChoiceCluster(b, choice.flag)
		for _, claimName := range []string{"gpu1", "mig1g10gb"} {
			if choice.name == "none" && claimName == "mig1g10gb" {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", choice.name, claimName), func(b *testing.B) {
				run := c.allocator(b, "incubating", claims[claimName])
				run()
				b.ReportAllocs()
				for b.Loop() {
					run()
				}
				b.ReportMetric(float64(devices), "devices/node")
				b.ReportMetric(float64(bytes), "proto-B/node")
			})
		}
	}
}

// TestMigProfileChoiceCost guards the point of --mig-profiles: fewer
// published profiles, fewer devices and allocations per whole-GPU claim.
func TestMigProfileChoiceCost(t *testing.T) {
	var prevDevices int
	var prevAllocs float64
	for i, choice := range migChoices {
		c, devices, bytes := migChoiceCluster(t, choice.flag)
		allocs := testing.AllocsPerRun(10, c.allocator(t, "incubating", gpu1Claim()))
		t.Logf("--mig-profiles=%s: %d devices, %d protobuf bytes, %.0f allocs per whole-GPU Filter call", choice.flag, devices, bytes, allocs)
		if i > 0 && (devices >= prevDevices || allocs >= prevAllocs) {
			t.Errorf("%s: %d devices and %.0f allocs, not fewer than the previous choice's %d and %.0f", choice.name, devices, allocs, prevDevices, prevAllocs)
		}
		prevDevices, prevAllocs = devices, allocs
	}
}

// TestMigProfileChoicePublished: a plugin started with three profiles
// publishes only their placements; a claim for one of them is prepared, a
// claim for another profile stays unschedulable.
func TestMigProfileChoicePublished(t *testing.T) {
	choice, _ := slicebuilder.ParseMigProfiles("1g.10gb,3g.40gb,7g.80gb")
	ctx, c := startClusterWith(t, Options{Profile: "dgx-h100", MigProfiles: choice})
	published, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range published {
		for _, d := range s.Spec.Devices {
			if p := d.Attributes[slicebuilder.AttrProfile]; p.StringValue != nil && !slices.Contains(choice.Only, *p.StringValue) {
				t.Errorf("published %s of profile %s", d.Name, *p.StringValue)
			}
		}
	}
	if _, err := runClaim(ctx, t, c, migClaim("small", false, "1g.10gb")); err != nil {
		t.Errorf("1g.10gb claim: %v", err)
	}
	if _, err := runClaim(ctx, t, c, migClaim("medium", false, "2g.20gb")); err == nil {
		t.Error("a 2g.20gb claim was allocated though 2g.20gb is not published")
	}
}
