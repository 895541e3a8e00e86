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

package scheduler

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// sliceIndex holds, for each node, the slices the allocator reads when it
// allocates there: the slices local to the node (spec.nodeName), every
// other slice of their pools, and the slices local to no node. The
// allocator reads nothing else on that node (its GatherPools looks at a
// node's own slices and the shared ones, and at all slices only to tell
// whether a pool it saw there is complete), so an allocator over these
// allocates there exactly as one over the whole inventory does, while
// building it costs a node's slices rather than the fleet's: at 1000
// nodes, one allocator over everything cost gpudra check more than the
// allocation itself, once per pod.
type sliceIndex struct {
	shared []*resourceapi.ResourceSlice
	byNode map[string][]*resourceapi.ResourceSlice
	// poolNodes are the nodes each pool has slices on: almost always one.
	poolNodes map[poolKey][]string
}

type poolKey struct{ driver, pool string }

func newSliceIndex(all []*resourceapi.ResourceSlice) *sliceIndex {
	ix := &sliceIndex{byNode: map[string][]*resourceapi.ResourceSlice{}, poolNodes: map[poolKey][]string{}}
	poolNodes := ix.poolNodes
	for _, sl := range all {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName == "" {
			ix.shared = append(ix.shared, sl)
			continue
		}
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		if !slices.Contains(poolNodes[k], *sl.Spec.NodeName) {
			poolNodes[k] = append(poolNodes[k], *sl.Spec.NodeName)
		}
	}
	// In inventory order, as the allocator would meet them.
	for _, sl := range all {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName == "" {
			continue
		}
		for _, n := range poolNodes[poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}] {
			ix.byNode[n] = append(ix.byNode[n], sl)
		}
	}
	return ix
}

// forNode returns the slices the allocator reads on node.
func (ix *sliceIndex) forNode(node string) []*resourceapi.ResourceSlice {
	local := ix.byNode[node]
	out := make([]*resourceapi.ResourceSlice, 0, len(local)+len(ix.shared))
	return append(append(out, local...), ix.shared...)
}

// replaceNode replaces the slices local to node with local, as
// Scheduler.ReplaceNodeSlices does to the inventory, without reading the
// rest of it: check republishes a node after each prepare. It says false
// when it cannot, because a pool involved has slices on other nodes too or
// a slice is not local to node; the caller then builds the index anew.
func (ix *sliceIndex) replaceNode(node string, local []*resourceapi.ResourceSlice) bool {
	onlyHere := func(k poolKey) bool {
		nodes := ix.poolNodes[k]
		return len(nodes) == 0 || len(nodes) == 1 && nodes[0] == node
	}
	for _, sl := range local {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName != node || !onlyHere(poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}) {
			return false
		}
	}
	for _, sl := range ix.byNode[node] {
		if !onlyHere(poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}) {
			return false
		}
	}
	for _, sl := range ix.byNode[node] {
		delete(ix.poolNodes, poolKey{sl.Spec.Driver, sl.Spec.Pool.Name})
	}
	for _, sl := range local {
		ix.poolNodes[poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}] = []string{node}
	}
	if len(local) == 0 {
		delete(ix.byNode, node)
	} else {
		ix.byNode[node] = slices.Clone(local)
	}
	return true
}
