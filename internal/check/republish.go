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
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// A node's plugin republishes its slices after each prepare: on a node
// that publishes the MIG placements of its spare GPUs only, a claim that
// takes a partition of the spare makes the next free GPU a spare
// (docs/mig.md). Where claims see what earlier ones hold (--sequential,
// the pods of a gang), later claims see the node's slices as its plugin
// republished them (Options.Republish); the report's inventory stays the
// one given. Within a group of claims that hold their devices together
// (the replicas of a workload without --sequential) too.

// republishedNode is what one node published since its slices were first
// replaced.
type republishedNode struct {
	// given are the node's slices as the inventory holds them.
	given []*resourceapi.ResourceSlice
	// prepared are the allocations on the node, one per claim, in order.
	prepared [][]resourceapi.DeviceRequestAllocationResult
}

// republish replaces the node's slices with what it publishes once the
// claim allocated there (res) is prepared, beside those before it.
func (r *runner) republish(node string, res *resourceapi.AllocationResult) {
	if r.opts.Republish == nil || node == "" || (!r.opts.Sequential && r.group == "") {
		return // the next claim sees an empty cluster: nothing to republish
	}
	if r.republished == nil {
		r.republished = map[string]*republishedNode{}
	}
	rn, ok := r.republished[node]
	if !ok {
		rn = &republishedNode{given: r.sched.NodeSlices(node)}
		r.republished[node] = rn
	}
	rn.prepared = append(rn.prepared, slices.Clone(res.Devices.Results))
	r.publishNode(node, rn)
}

// publishNode hands the scheduler what the node publishes once the claims
// in rn.prepared are, and the prepare-time checks the node read back from
// it.
func (r *runner) publishNode(node string, rn *republishedNode) {
	out := rn.given
	if len(rn.prepared) > 0 {
		var err error
		out, err = r.opts.Republish(r.ctx, node, rn.prepared)
		if err != nil {
			r.addFinding(Finding{Kind: FindingUnsatisfiable, Severity: SeverityNote, Object: "node " + node,
				Message: fmt.Sprintf("what node %s publishes once its claims are prepared is not known (%v): later claims see its slices as they were", node, err)})
			return
		}
	}
	r.sched.ReplaceNodeSlices(node, out)
	byPool := map[string][]resourceapi.Device{}
	for _, s := range out {
		if s.Spec.Driver == r.opts.DriverName {
			byPool[s.Spec.Pool.Name] = append(byPool[s.Spec.Pool.Name], s.Spec.Devices...)
		}
	}
	for pool, devs := range byPool {
		if len(rn.prepared) == 0 {
			delete(r.nodes, pool) // read back from the inventory again
		} else {
			r.nodes[pool] = slicebuilder.NodeOf(pool, devs)
		}
	}
}

// savePublished is what the nodes published, for restorePublished.
func (r *runner) savePublished() map[string][][]resourceapi.DeviceRequestAllocationResult {
	out := map[string][][]resourceapi.DeviceRequestAllocationResult{}
	for node, rn := range r.republished {
		out[node] = slices.Clone(rn.prepared)
	}
	return out
}

// restorePublished makes every node publish what it published when
// savePublished returned saved (nil: the slices as given).
func (r *runner) restorePublished(saved map[string][][]resourceapi.DeviceRequestAllocationResult) {
	for _, node := range slices.Sorted(maps.Keys(r.republished)) {
		rn := r.republished[node]
		if len(rn.prepared) == len(saved[node]) {
			continue // claims are only appended between a save and its restore
		}
		rn.prepared = saved[node]
		r.publishNode(node, rn)
	}
}
