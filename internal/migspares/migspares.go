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

// Package migspares is gpudra-controller's policy for spares across the
// fleet (--mig-spare-gpus=fleet on the plugins): which nodes keep one free
// GPU's MIG placements published, so that a first partition claim finds
// somewhere to go, without every node of the fleet publishing a spare's
// placements (25 devices per H100 that the scheduler converts on every
// Filter call). The controller writes the assignment into a ConfigMap the
// plugins read (node name -> spares); this package only decides it, from a
// view of the fleet, so that every rule is tested on a table.
//
// The controller only ever adds spares where the fleet lacks them: a
// plugin keeps publishing a free GPU whose placements it published before
// (sticky: a claim the scheduler allocated there may not have reached the
// node yet), so dropping a node's assignment only stops its refills.
package migspares

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpudra/gpudra/internal/sparesmap"
)

// GPU is one partitionable GPU of a node, as the published slices and
// the allocated claims show it.
type GPU struct {
	// Whole: a claim holds the GPU whole.
	Whole bool
	// Partitioned: a claim holds one of its MIG placements.
	Partitioned bool
	// Unhealthy: the GPU (or a placement of it) carries a device taint.
	Unhealthy bool
	// Published: its MIG placements are published now.
	Published bool
	// Partitions counts its placements a claim holds (Demand counts
	// claims, not GPUs).
	Partitions int
}

// free says whether the GPU could be a spare: nothing holds any part of
// it and it is healthy.
func (g GPU) free() bool { return !g.Whole && !g.Partitioned && !g.Unhealthy }

// Node is one node of the fleet.
type Node struct {
	Name string
	// Pool is the node pool it belongs to ("" for none): each pool has a
	// target of its own (AssignPools, PoolTargets).
	Pool string
	// Ready: the node is Ready and not cordoned, so a pod can go there.
	Ready bool
	// GPUs are its partitionable GPUs (the others never publish MIG
	// placements).
	GPUs []GPU
}

// freeGPUs counts the GPUs that could be spares.
func (n Node) freeGPUs() int {
	c := 0
	for _, g := range n.GPUs {
		if g.free() {
			c++
		}
	}
	return c
}

// publishesSpare says whether a free GPU's placements are published now.
func (n Node) publishesSpare() bool {
	return slices.ContainsFunc(n.GPUs, func(g GPU) bool { return g.Published && g.free() })
}

// partitioned says whether a partition claim holds one of its GPUs: the
// next partition packs beside it rather than breaking a GPU elsewhere.
func (n Node) partitioned() bool {
	return slices.ContainsFunc(n.GPUs, func(g GPU) bool { return g.Partitioned })
}

// Assignment is node name -> spare GPUs assigned (>= 1), the ConfigMap's
// data.
type Assignment map[string]int

// Result is one decision.
type Result struct {
	Assignment Assignment
	// Target is the number of nodes that should have a spare; WithSpare
	// those that have one under Assignment (published, or assigned with
	// a free GPU: a write the plugin has not acted on yet).
	Target, WithSpare int
	// Given are the nodes given a spare for waiting pods, by pod: the
	// next call's given.
	Given map[string]string
	// Pools are Target and WithSpare by node pool.
	Pools map[string]PoolResult
}

// PoolResult is one node pool's part of a Result.
type PoolResult struct {
	Target, WithSpare int
}

// Targets are the numbers of nodes that should have a spare, by node
// pool.
type Targets map[string]int

// Total is the targets' sum.
func (t Targets) Total() int {
	n := 0
	for _, v := range t {
		n += v
	}
	return n
}

// Waiting is a waiting pod (one of a shape, or one of a gang's pods)
// that fits on no node now, and the nodes it may go to that have a free
// GPU.
type Waiting struct {
	Pod   string
	Nodes []string
	// Gang is the pod's PodGroup when it is one of a gang's pods: a gang
	// binds whole, so its pods are given spares together or not at all.
	Gang string
}

// Assign computes the new assignment from the fleet, the current
// assignment and the target number of nodes with a spare (Target.Nodes).
//
//   - A node has a spare when it is ready and publishes the placements
//     of a free healthy GPU, or is assigned and still has a free healthy
//     partitionable GPU (so that an assignment whose write the plugin has
//     not acted on yet is not made again elsewhere).
//   - Assignments of nodes that are gone, not ready, or without a free
//     healthy partitionable GPU are dropped; the others are kept (no
//     churn), as sparesmap.Own (1): every assignment is 1, within the node's GPUs.
//   - While fewer nodes than the target have a spare, 1 is assigned to
//     more nodes without one, by preference (less): partitioned nodes
//     first (MIG packs together), then the most free GPUs, then the
//     hash of the name (every replica and restart agrees; racks are
//     spread).
//   - Pods that wait and fit on no node now (Waiting: for each, the
//     nodes it may go to that have a free GPU) are given a spare where
//     they may go: a pod whose node selector, affinity or tolerations
//     keep it off every node that keeps a spare, or that needs something
//     only a node without one has (a partition beside that node's L4),
//     would otherwise wait forever. It fits nowhere now, so the spares
//     already published where it may go do not help it: it is given one
//     on the most preferred of its nodes that keeps none and has a free
//     healthy GPU, over the target, once (Result.Given remembers the
//     node, by pod, for the next call), and that node is kept while the
//     pod waits. Waiting lists for each pod only the nodes where a spare
//     lets it in (package fleet asks the allocator): a pod that waits for
//     something a spare cannot give (nine GPUs on an eight-GPU node) has
//     none and costs nothing. Waiting pods hold at most target nodes this
//     way (the bound; pods that keep the node they were given first), so
//     that however many pods wait, at most twice the target's nodes are
//     assigned. The pods of a gang (Waiting.Gang) are given nodes
//     together: a gang started within the bound is given a node for each
//     of its pods, one that is not is given none.
//   - While more have one, assignments are dropped (given back): first
//     the nodes given to pods that no longer wait, then the least
//     preferred; first those whose spare is not published yet (dropping
//     them takes a node off the count), then, while more nodes than the
//     target are assigned, any; never one a waiting pod needs. A dropped
//     node's published spare stays (the plugin keeps it, sticky: a claim
//     may hold it); only its refills stop.
func Assign(nodes []Node, current Assignment, target int, waiting []Waiting, given map[string]string) Result {
	return assign(nodes, current, Targets{"": target}, func(Node) string { return "" }, waiting, given)
}

// AssignPools is Assign with a target per node pool (Node.Pool; Targets,
// from PoolTargets): each pool's nodes with a spare are counted against
// its own target, and spares are added and given back within it. Waiting
// pods hold at most the targets' total of nodes.
func AssignPools(nodes []Node, current Assignment, targets Targets, waiting []Waiting, given map[string]string) Result {
	return assign(nodes, current, targets, func(n Node) string { return n.Pool }, waiting, given)
}

func assign(nodes []Node, current Assignment, targets Targets, poolOf func(Node) string, waiting []Waiting, given map[string]string) Result {
	a := newAssigner(nodes, current, poolOf)
	// The nodes waiting pods need, one per pod, are given before the
	// targets' own picks so that those can count them.
	a.giveWaiting(waiting, given, targets.Total())
	pools := a.pools()
	for _, pool := range pools {
		a.meetTarget(pool, targets[pool], given)
	}
	res := Result{Assignment: a.out, Given: a.gave, Pools: map[string]PoolResult{}}
	for _, pool := range pools {
		res.Pools[pool] = PoolResult{Target: targets[pool], WithSpare: a.with[pool]}
		res.Target += targets[pool]
		res.WithSpare += a.with[pool]
	}
	return res
}

// assigner is one assign call's state: the assignment it builds, and
// what it counts on the way.
type assigner struct {
	byName map[string]Node
	poolOf func(Node) string
	out    Assignment
	// with counts the nodes with a spare, by pool; candidates are the
	// ready nodes with a free GPU and no spare, by pool.
	with       map[string]int
	candidates map[string][]Node
	// needed are the nodes waiting pods were given; gave the node each
	// pod was given (Result.Given).
	needed map[string]bool
	gave   map[string]string
}

// newAssigner keeps the current assignments that still hold (Assign's
// doc says which) and counts the nodes with a spare and the candidates.
func newAssigner(nodes []Node, current Assignment, poolOf func(Node) string) *assigner {
	a := &assigner{
		byName: make(map[string]Node, len(nodes)), poolOf: poolOf, out: Assignment{},
		with: map[string]int{}, candidates: map[string][]Node{},
		needed: map[string]bool{}, gave: map[string]string{},
	}
	for _, n := range nodes {
		a.byName[n.Name] = n
	}
	for name, v := range current {
		// Written as sparesmap.Own whatever it was: the controller writes only
		// what it assigns.
		if n, ok := a.byName[name]; ok && v > 0 && n.Ready && n.freeGPUs() > 0 {
			a.out[name] = sparesmap.Own
		}
	}
	for _, n := range nodes {
		switch {
		case a.hasSpare(n):
			a.with[poolOf(n)]++
		case n.Ready && n.freeGPUs() > 0:
			a.candidates[poolOf(n)] = append(a.candidates[poolOf(n)], n)
		}
	}
	return a
}

// hasSpare says whether a node has a spare: ready, and publishing one or
// assigned with a free GPU left.
func (a *assigner) hasSpare(n Node) bool {
	return n.Ready && (n.publishesSpare() || (a.out[n.Name] > 0 && n.freeGPUs() > 0))
}

// giveWaiting gives each waiting pod a node where a spare lets it in. At
// most bound (the targets' total) of them: pods that keep the node they
// were given come first, then the others in order; a gang started is
// given a node for each of its pods (half a gang's spares would not let
// it in).
func (a *assigner) giveWaiting(waiting []Waiting, given map[string]string, bound int) {
	keeps := func(w Waiting) bool { return given[w.Pod] != "" && slices.Contains(w.Nodes, given[w.Pod]) }
	unit := func(w Waiting) string { return cmp.Or(w.Gang, w.Pod) }
	unitKeeps := map[string]bool{}
	for _, w := range waiting {
		unitKeeps[unit(w)] = unitKeeps[unit(w)] || keeps(w)
	}
	waiting = slices.Clone(waiting)
	slices.SortStableFunc(waiting, func(a, b Waiting) int {
		return -cmp.Compare(boolInt(unitKeeps[unit(a)]), boolInt(unitKeeps[unit(b)]))
	})
	started := map[string]bool{}
	for _, w := range waiting {
		if len(a.needed) >= bound && !started[unit(w)] {
			continue
		}
		started[unit(w)] = true
		a.giveOne(w, given[w.Pod])
	}
}

// giveOne gives a waiting pod a node among those it may go to that are
// ready with a free GPU: the one it was given before (prev) if it still
// is one, else the most preferred that keeps no spare yet.
func (a *assigner) giveOne(w Waiting, prev string) {
	var fit []Node
	for _, name := range w.Nodes {
		if n, ok := a.byName[name]; ok && n.Ready && n.freeGPUs() > 0 {
			fit = append(fit, n)
		}
	}
	// Given one already, on a node it may still go to with a free
	// GPU: keep it while the pod waits, and give no other (it may
	// need what no spare gives). A node that is gone or full no
	// longer helps it: it is given another.
	if i := slices.IndexFunc(fit, func(n Node) bool { return n.Name == prev }); i >= 0 {
		name := fit[i].Name
		if !a.hasSpare(fit[i]) {
			a.with[a.poolOf(fit[i])]++
		}
		a.out[name] = max(a.out[name], 1)
		a.needed[name] = true
		a.gave[w.Pod] = name
		return
	}
	fit = slices.DeleteFunc(fit, func(n Node) bool { return n.publishesSpare() || a.out[n.Name] > 0 })
	if len(fit) == 0 {
		return
	}
	pick := sortedNodes(fit)[0]
	a.out[pick.Name] = 1
	a.needed[pick.Name] = true
	a.gave[w.Pod] = pick.Name
	pool := a.poolOf(pick)
	a.with[pool]++
	a.candidates[pool] = slices.DeleteFunc(a.candidates[pool], func(n Node) bool { return n.Name == pick.Name })
}

// pools are the pools with a spare or a candidate, sorted.
func (a *assigner) pools() []string {
	pools := slices.Sorted(maps.Keys(a.with))
	for pool := range a.candidates {
		if _, ok := a.with[pool]; !ok {
			pools = append(pools, pool)
		}
	}
	slices.Sort(pools)
	return pools
}

// meetTarget assigns the pool's most preferred candidates while fewer of
// its nodes than target have a spare, and gives back while more do.
func (a *assigner) meetTarget(pool string, target int, given map[string]string) {
	if c := a.candidates[pool]; a.with[pool] < target {
		for _, n := range sortedNodes(c)[:min(target-a.with[pool], len(c))] {
			a.out[n.Name] = 1
			a.with[pool]++
		}
	}
	if a.with[pool] > target {
		giveBack(a.out, a.byName, a.poolOf, pool, target, a.needed, given, &a.with)
	}
}

// sortedNodes sorts nodes by preference (less), in place.
func sortedNodes(ns []Node) []Node {
	slices.SortFunc(ns, less)
	return ns
}

// giveBack drops the pool's assignments over its target: first the nodes
// given to pods that no longer wait (they are last, dropped first), then
// by preference; first those whose spare is not published yet (each drop
// takes one node off the count), then, while more of its nodes than the
// target are assigned, any; never one a waiting pod needs.
func giveBack(out Assignment, byName map[string]Node, poolOf func(Node) string, pool string, target int,
	needed map[string]bool, given map[string]string, with *map[string]int) {
	var assigned []Node
	neededHere := 0
	for name := range out {
		n := byName[name]
		if poolOf(n) != pool {
			continue
		}
		if needed[name] {
			neededHere++
			continue
		}
		assigned = append(assigned, n)
	}
	wasGiven := map[string]bool{}
	for _, name := range given {
		wasGiven[name] = true
	}
	slices.SortFunc(assigned, func(a, b Node) int {
		return cmp.Or(cmp.Compare(boolInt(wasGiven[a.Name]), boolInt(wasGiven[b.Name])), less(a, b))
	})
	w := *with
	kept := len(assigned)
	for i := len(assigned) - 1; i >= 0 && w[pool] > target; i-- {
		if n := assigned[i]; !n.publishesSpare() {
			delete(out, n.Name)
			w[pool]--
			kept--
		}
	}
	for i := len(assigned) - 1; i >= 0 && kept > target; i-- {
		if _, ok := out[assigned[i].Name]; ok {
			delete(out, assigned[i].Name)
			kept--
		}
	}
}

// less orders nodes by preference for a new spare.
func less(a, b Node) int {
	return cmp.Or(
		-cmp.Compare(boolInt(a.partitioned()), boolInt(b.partitioned())),
		-cmp.Compare(a.freeGPUs(), b.freeGPUs()),
		cmp.Compare(nameHash(a.Name), nameHash(b.Name)),
		cmp.Compare(a.Name, b.Name))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameHash orders nodes alike in a way that does not follow their names:
// node-1 … node-5 are often one rack.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// CanPartition counts the nodes that can take a spare: ready, with a
// partitionable GPU.
func CanPartition(nodes []Node) int {
	c := 0
	for _, n := range nodes {
		if n.Ready && len(n.GPUs) > 0 {
			c++
		}
	}
	return c
}

// DefaultTarget is --mig-spare-nodes' default.
const DefaultTarget = "5%"

// Target is the --mig-spare-nodes flag: a number of nodes, or a percent
// of the nodes that can partition; zero turns the fleet's spares off.
type Target struct {
	N       int
	Percent bool
}

// ParseTarget reads --mig-spare-nodes: "5%", "3", or "0" (off).
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	num, percent := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	switch {
	case err != nil:
		return Target{}, fmt.Errorf("%q: want a number of nodes such as 3, a percent of the nodes that can partition such as %s, or 0 (off)", s, DefaultTarget)
	case n < 0:
		return Target{}, fmt.Errorf("%q: a number of nodes cannot be negative", s)
	case percent && n > 100:
		return Target{}, fmt.Errorf("%q: at most 100%%", s)
	}
	return Target{N: n, Percent: percent}, nil
}

// Off says whether the controller keeps no spares: plugins in fleet mode
// then publish none beyond their partitioned and sticky GPUs.
func (t Target) Off() bool { return t.N == 0 }

// String is the flag's spelling.
func (t Target) String() string {
	if t.Percent {
		return strconv.Itoa(t.N) + "%"
	}
	return strconv.Itoa(t.N)
}

// Nodes is the number of nodes that should have a spare among
// canPartition: the percent rounded up, never fewer than two (one spare
// node that goes away would leave none) nor more than canPartition.
func (t Target) Nodes(canPartition int) int {
	if t.Off() {
		return 0
	}
	n := t.N
	if t.Percent {
		n = int(math.Ceil(float64(t.N) * float64(canPartition) / 100))
	}
	return min(max(n, 2), canPartition)
}
