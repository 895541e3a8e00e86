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
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// spareGPUsUsage is the help of the offline commands' --mig-spare-gpus.
const spareGPUsUsage = "as the plugin's --mig-spare-gpus: a number from 1, all, or fleet (each fake node as one that gpudra-controller keeps a spare on, like 1: any node with a free GPU can be given one, and which will be is the controller's choice at the time)"

// parseOfflineSpares reads --mig-spare-gpus for a fake node. In fleet mode
// a real node publishes a spare only while the controller assigns it one,
// and a claim that fits a spare waits for (at most) the next such node, so
// a fake node is one that keeps one: a claim that needs more than one
// node's spares is Pending either way, and one that fits is not refused.
// Of several fake nodes, those beyond the controller's default target
// keep none (fleetSpareNodes).
func parseOfflineSpares(s string) (slicebuilder.SpareGPUs, error) {
	spare, err := slicebuilder.ParseSpareGPUs(s)
	if err != nil || !spare.Fleet {
		return spare, err
	}
	return slicebuilder.FleetAssigned(slicebuilder.DefaultSpareGPUs), nil
}

// fleetSpareNodes is, in fleet mode, how many of nodes fake nodes
// gpudra-controller keeps a spare on with its default --mig-spare-nodes
// (5%, at least 2): node-1 … node-N; check says a claim that fits only on
// the others waits for the controller's spare. 0 outside fleet mode.
func fleetSpareNodes(spare slicebuilder.SpareGPUs, nodes int) int {
	if !spare.Fleet {
		return 0
	}
	target, err := migspares.ParseTarget(migspares.DefaultTarget)
	if err != nil {
		panic(err) // the default parses
	}
	return target.Nodes(nodes)
}
