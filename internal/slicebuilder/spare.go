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
	"strconv"
	"strings"
)

// DefaultSpareGPUs is how many free GPUs of a node publish their MIG
// placements by default, beside the GPUs already partitioned: one, the
// fewest that still lets any node take a partition claim. Every placement
// published is a device that the scheduler converts on every Filter call
// for every pod it places, and that the API server and every informer
// hold; one spare H100 is 25 placements, every GPU 200 (docs/mig.md,
// "What is published").
const DefaultSpareGPUs = 1

// SpareGPUs says how many free GPUs of a node publish their MIG
// placements beside the partitioned ones (--mig-spare-gpus). The zero
// value is DefaultSpareGPUs.
type SpareGPUs struct {
	// All publishes the placements of every partitionable GPU that no
	// claim holds whole, as gpudra did before spares.
	All bool
	// Fleet leaves the number to gpudra-controller, which keeps a few
	// spares across the whole fleet rather than one on every node
	// (docs/mig.md, "Spares across the fleet"): N is then what the
	// controller assigned this node, and 0 means none.
	Fleet bool
	// N is the number of free GPUs kept ready for the next partition
	// claims (0: DefaultSpareGPUs, unless Fleet).
	N int
}

// ParseSpareGPUs reads the --mig-spare-gpus flag: "all", "fleet", or a
// number of GPUs from 1 up.
func ParseSpareGPUs(s string) (SpareGPUs, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "all":
		return SpareGPUs{All: true}, nil
	case "fleet":
		return SpareGPUs{Fleet: true}, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return SpareGPUs{}, fmt.Errorf("%q: want all, fleet, or a number of GPUs such as %d", s, DefaultSpareGPUs)
	case n < 1:
		return SpareGPUs{}, fmt.Errorf("%d: at least one free GPU must publish its placements, or no node could take a first partition claim; fleet lets gpudra-controller choose the nodes that keep spares, and --mig-profiles=none publishes no MIG at all", n)
	}
	return SpareGPUs{N: n}, nil
}

// FleetAssigned is the fleet mode with n spares assigned to the node (0:
// none).
func FleetAssigned(n int) SpareGPUs { return SpareGPUs{Fleet: true, N: max(n, 0)} }

// String is the flag's spelling.
func (s SpareGPUs) String() string {
	switch {
	case s.All:
		return "all"
	case s.Fleet:
		return "fleet"
	}
	return strconv.Itoa(s.count())
}

// count is the number of spare GPUs, the default filled in.
func (s SpareGPUs) count() int {
	if s.Fleet {
		return max(s.N, 0)
	}
	if s.N <= 0 {
		return DefaultSpareGPUs
	}
	return s.N
}
