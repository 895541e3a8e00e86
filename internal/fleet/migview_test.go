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

package fleet

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// partitionable is a whole GPU whose device says it can be partitioned.
func partitionable(d resourceapi.Device, arch string) resourceapi.Device {
	yes := true
	d.Attributes["migCapable"] = resourceapi.DeviceAttribute{BoolValue: &yes}
	d.Attributes["architecture"] = str(arch)
	return d
}

func TestMIGNodes(t *testing.T) {
	in := Inputs{
		DriverName: driver,
		Now:        now,
		Slices: []*resourceapi.ResourceSlice{
			slice("node-a", 1,
				partitionable(gpuDev(0, h100, "GPU-a0"), "Hopper"), // partitioned
				partitionable(gpuDev(1, h100, "GPU-a1"), "Hopper"), // published, free
				partitionable(gpuDev(2, h100, "GPU-a2"), "Hopper"), // held whole
				tainted(partitionable(gpuDev(3, h100, "GPU-a3"), "Hopper")),
				partitionable(gpuDev(4, h100, "GPU-a4"), "Hopper"), // free, not published
				gpuDev(5, "NVIDIA L4", "GPU-a5"),                   // not MIG-capable
			),
			slice("node-a", 1,
				migDev("gpu-0-mig-1g10gb-0", h100, "1g.10gb", "GPU-a0"), migDev("gpu-0-mig-1g10gb-1", h100, "1g.10gb", "GPU-a0"),
				migDev("gpu-1-mig-1g10gb-0", h100, "1g.10gb", "GPU-a1")),
			// Where GPUs that publish no placements would publish them.
			slice("node-a", 1),
			// A pool that publishes no MIG (--mig-profiles=none): no
			// empty slice, no partitionable GPU.
			slice("node-c", 1, partitionable(gpuDev(0, h100, "GPU-c0"), "Hopper")),
			// An Ampere GPU with MIG mode off (its placements would need a
			// reset), and one with MIG mode on: placements only.
			slice("node-b", 1, partitionable(gpuDev(0, a100, "GPU-b0"), "Ampere"),
				migDev("gpu-1-mig-1g5gb-0", a100, "1g.5gb", "GPU-b1")),
			slice("node-b", 1),
		},
		Nodes:      []*corev1.Node{node("node-a", true, true), node("node-b", true, false)},
		PoolLabels: DefaultPoolLabels,
		Claims: []*resourceapi.ResourceClaim{
			allocated(claim("ns", "whole", "gpu.gpudra.io", 0), false, DeviceID{"node-a", "gpu-2"}),
			allocated(claim("ns", "mig", "mig.gpudra.io", 0), false, DeviceID{"node-a", "gpu-0-mig-1g10gb-0"}),
		},
	}
	// node-a is in a GKE node pool and a Karpenter one: the first label
	// of the list counts.
	in.Nodes[0].Labels = map[string]string{"cloud.google.com/gke-nodepool": "inference", "karpenter.sh/nodepool": "mig"}
	got := Account(in).MIG
	want := map[string]MIGNode{
		"node-a": {Schedulable: true, Pool: "karpenter.sh/nodepool=mig", GPUs: []MIGGPU{
			{UUID: "GPU-a0", Partitioned: true, Published: true, Partitions: 1},
			{UUID: "GPU-a1", Published: true},
			{UUID: "GPU-a2", Whole: true},
			{UUID: "GPU-a3", Tainted: true},
			{UUID: "GPU-a4"},
		}},
		"node-b": {GPUs: []MIGGPU{{UUID: "GPU-b1", Published: true}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MIG view:\n got %+v\nwant %+v", got, want)
	}
}

// TestMIGNodesFleetLayouts: the slices the plugin builds in fleet mode.
// A node without a spare publishes the compact layout (whole GPUs, one
// empty counter slice, monitors; slicebuilder's layout.go), and its one
// empty slice still says that its GPUs can partition; a node with a
// spare publishes the fixed layout; a node that publishes no MIG
// (--mig-profiles=none) has no empty slice and no partitionable GPU.
func TestMIGNodesFleetLayouts(t *testing.T) {
	ctx := context.Background()
	none, err := slicebuilder.ParseMigProfiles("none")
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]fakenodes.Pool{
		"node-compact": {SpareGPUs: slicebuilder.FleetAssigned(0)},
		"node-spare":   {SpareGPUs: slicebuilder.FleetAssigned(1)},
		"node-nomig":   {SpareGPUs: slicebuilder.FleetAssigned(0), MigProfiles: none},
	}
	in := Inputs{DriverName: driver, Now: now}
	perPool := map[string]int{}
	for name, pool := range pools {
		sl, err := fakenodes.Node(ctx, "dgx-h100", name, driver, t.TempDir(), pool)
		if err != nil {
			t.Fatal(err)
		}
		perPool[name] = len(sl)
		in.Slices = append(in.Slices, sl...)
		in.Nodes = append(in.Nodes, node(name, true, true))
	}
	if want := map[string]int{"node-compact": 3, "node-spare": 11, "node-nomig": 2}; !reflect.DeepEqual(perPool, want) {
		t.Errorf("slices per node %v, want %v", perPool, want)
	}
	got := Account(in).MIG
	for name, want := range map[string][2]int{"node-compact": {8, 0}, "node-spare": {8, 1}} {
		n := got[name]
		published := 0
		for _, g := range n.GPUs {
			if g.Published {
				published++
			}
		}
		if !n.Schedulable || len(n.GPUs) != want[0] || published != want[1] {
			t.Errorf("%s: schedulable %v, %d partitionable GPUs, %d published; want schedulable, %d and %d", name, n.Schedulable, len(n.GPUs), published, want[0], want[1])
		}
	}
	if n, ok := got["node-nomig"]; ok {
		t.Errorf("node-nomig publishes no MIG, yet counts as partitionable: %+v", n)
	}
}
