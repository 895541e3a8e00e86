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
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// MIGNode is one node's partitionable GPUs, as its slices and the
// allocations show them.
type MIGNode struct {
	// Schedulable: the node is Ready and not cordoned.
	Schedulable bool
	// Pool is the node's pool (NodePool), "" for none.
	Pool string
	// GPUs are in the order the node's slices list them.
	GPUs []MIGGPU
}

// MIGGPU is one partitionable GPU.
type MIGGPU struct {
	UUID string
	// Whole: a claim holds the whole GPU. Partitioned: a claim holds one
	// of its placements.
	Whole, Partitioned bool
	// Tainted: the GPU's device, or one of its placements, carries a
	// device taint (the plugin's unhealthy taint).
	Tainted bool
	// Published: its MIG placements are published now.
	Published bool
	// Partitions counts its placements allocated (Partitioned: at
	// least one); the spares' demand counts claims, not GPUs.
	Partitions int
}

// migNodes finds every node's partitionable GPUs: those whose placements
// are published, and those whose whole device says the GPU could publish
// them, MIG-capable and not Ampere (an Ampere GPU with MIG mode off needs
// a reset to turn it on, so the plugin never publishes its placements;
// with MIG mode on, its placements are published and say so), in a pool
// that has an empty slice where placements not published would go
// (inventory.migSlots: fleet mode's compact layout keeps one; a pool that
// publishes no MIG has none).
func migNodes(inv inventory, alloc map[DeviceID]bool, partitioned map[string]bool) map[string]MIGNode {
	type key struct{ node, uuid string }
	gpus := map[key]*MIGGPU{}
	order := map[string][]key{}
	get := func(node, uuid string) *MIGGPU {
		k := key{node, uuid}
		g, ok := gpus[k]
		if !ok {
			g = &MIGGPU{UUID: uuid, Partitioned: partitioned[uuid]}
			gpus[k] = g
			order[node] = append(order[node], k)
		}
		return g
	}
	for _, d := range inv.devices {
		if d.Node == "" {
			continue
		}
		switch {
		case d.Type == slicebuilder.TypeGPU && d.UUID != "" && d.MigCapable && d.Architecture != "Ampere" && inv.migSlots[d.ID.Pool]:
			g := get(d.Node, d.UUID)
			g.Whole = g.Whole || alloc[d.ID]
			g.Tainted = g.Tainted || len(d.Taints) > 0
		case d.Type == slicebuilder.TypeMIG && d.ParentUUID != "":
			g := get(d.Node, d.ParentUUID)
			g.Published = true
			g.Tainted = g.Tainted || len(d.Taints) > 0
			if alloc[d.ID] {
				g.Partitions++
			}
		}
	}
	out := make(map[string]MIGNode, len(order))
	for node, keys := range order {
		n := MIGNode{Schedulable: inv.schedulable[node], Pool: inv.pool[node], GPUs: make([]MIGGPU, 0, len(keys))}
		for _, k := range keys {
			n.GPUs = append(n.GPUs, *gpus[k])
		}
		out[node] = n
	}
	return out
}
