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

package migspares

import (
	"fmt"
	"testing"
	"time"
)

// pools is two pools of n DGX-like nodes each, "inference" and
// "training", idle.
func pools(n int) []Node {
	var out []Node
	for _, pool := range []string{"inference", "training"} {
		for i := range n {
			nd := node(fmt.Sprintf("%s-%d", pool, i), idle(8)...)
			nd.Pool = pool
			out = append(out, nd)
		}
	}
	return out
}

// run puts claims on the first k nodes of a pool: partitions on one GPU
// each, or whole GPUs.
func run(nodes []Node, pool string, k, partitions, wholes int) {
	done := 0
	for i := range nodes {
		if nodes[i].Pool != pool || done == k {
			continue
		}
		done++
		gpus := idle(8)
		if partitions > 0 {
			gpus[0] = GPU{Partitioned: true, Published: true, Partitions: partitions}
		}
		for g := range wholes {
			gpus[1+g] = GPU{Whole: true}
		}
		nodes[i].GPUs = gpus
	}
}

// TestSparesFollowDemand (issue 30): with no setting per pool, a pool
// whose recent claims are partitions keeps a spare on every node, a pool
// of whole-GPU claims keeps the budget's few, and once the partitions are
// gone the target falls back as the half-life passes.
func TestSparesFollowDemand(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	budget := Target{N: 5, Percent: true}
	nodes := pools(40)
	d := &Demand{}
	d.Observe(t0, nodes, nil)
	got := budget.PoolTargets(nodes, d, t0)
	// 5% of 80 is 4, spread over two pools of 40: 2 each.
	if got["inference"] != 2 || got["training"] != 2 {
		t.Fatalf("idle fleet: targets %v, want the budget's 2 per pool", got)
	}

	// A burst: 10 inference nodes each take 3 partitions, 10 training
	// nodes each take 7 whole GPUs.
	t1 := t0.Add(time.Minute)
	run(nodes, "inference", 10, 3, 0)
	run(nodes, "training", 10, 0, 7)
	d.Observe(t1, nodes, nil)
	got = budget.PoolTargets(nodes, d, t1)
	if got["inference"] != 40 {
		t.Errorf("a pool of partition claims: target %d, want every node (40)", got["inference"])
	}
	if got["training"] != 2 {
		t.Errorf("a pool of whole-GPU claims: target %d, want the budget's 2", got["training"])
	}

	// The partitions end; an hour (six half-lives) later the pool keeps
	// the budget's spares again.
	t2 := t1.Add(time.Hour)
	for i := range nodes {
		if nodes[i].Pool == "inference" {
			nodes[i].GPUs = idle(8)
		}
	}
	d.Observe(t2, nodes, nil)
	if got = budget.PoolTargets(nodes, d, t2); got["inference"] != 2 {
		t.Errorf("an hour after the partitions ended: target %d, want the budget's 2", got["inference"])
	}
}

// TestDemandPrior: one partition claim on a quiet pool is not demand (a
// test pod does not put a spare on every node); three are.
func TestDemandPrior(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	budget := Target{N: 5, Percent: true}
	nodes := pools(40)
	d := &Demand{}
	d.Observe(t0, nodes, nil)
	run(nodes, "inference", 1, 1, 0)
	d.Observe(t0.Add(time.Second), nodes, nil)
	if got := budget.PoolTargets(nodes, d, t0.Add(time.Second)); got["inference"] > 10 {
		t.Errorf("one partition claim: target %d, want few", got["inference"])
	}
	run(nodes, "inference", 3, 1, 0)
	d.Observe(t0.Add(2*time.Second), nodes, nil)
	if got := budget.PoolTargets(nodes, d, t0.Add(2*time.Second)); got["inference"] < 30 {
		t.Errorf("three partition claims on a quiet pool: target %d, want most nodes", got["inference"])
	}
}

// TestDemandCountsWaitingPods: partition pods waiting for a spare are
// demand in the pool they may go to, before any is allocated.
func TestDemandCountsWaitingPods(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	nodes := pools(20)
	d := &Demand{}
	var waiting []Waiting
	for i := range 6 {
		waiting = append(waiting, Waiting{Pod: fmt.Sprintf("ns/p%d", i), Nodes: []string{"inference-3", "inference-4"}})
	}
	d.Observe(t0, nodes, waiting)
	got := Target{N: 5, Percent: true}.PoolTargets(nodes, d, t0)
	if got["inference"] != 20 || got["training"] != 1 {
		t.Errorf("targets %v, want every inference node and the budget's one training node", got)
	}
}

// TestOnePoolKeepsTheBudget: a fleet without pool labels is one pool,
// whose target with no demand is exactly --mig-spare-nodes' (Nodes).
func TestOnePoolKeepsTheBudget(t *testing.T) {
	for _, n := range []int{3, 10, 100, 101, 1000} {
		nodes := fleetOf(n, 8)
		for _, budget := range []Target{{N: 5, Percent: true}, {N: 3}, {N: 100, Percent: true}} {
			got := budget.PoolTargets(nodes, &Demand{}, time.Time{})
			if want := budget.Nodes(n); got[""] != want {
				t.Errorf("%d nodes, --mig-spare-nodes=%s: target %d, want %d", n, budget, got[""], want)
			}
		}
	}
}

// TestAssignPools: each pool's spares are counted against its own target:
// the training pool's spare does not count for the inference pool, and a
// pool over its target gives back only its own nodes.
func TestAssignPools(t *testing.T) {
	nodes := pools(4)
	res := AssignPools(nodes, Assignment{"training-0": 1, "training-1": 1, "training-2": 1}, Targets{"inference": 4, "training": 1}, nil, nil)
	in, tr := 0, 0
	for name := range res.Assignment {
		switch name[:8] {
		case "inferenc":
			in++
		case "training":
			tr++
		}
	}
	if in != 4 || tr != 1 {
		t.Errorf("assigned %v: %d inference and %d training nodes, want 4 and 1", res.Assignment, in, tr)
	}
	if res.Pools["inference"].WithSpare != 4 || res.Pools["training"].WithSpare != 1 || res.Target != 5 {
		t.Errorf("pools %+v, target %d; want 4 of 4, 1 of 1, 5 in all", res.Pools, res.Target)
	}
}

// TestGangGivenWhole: a gang's pods are given a spare each, even past the
// bound on waiting pods (half a gang's spares would not let it in), and a
// gang not started within the bound is given none.
func TestGangGivenWhole(t *testing.T) {
	nodes := fleetOf(10, 8)
	var waiting []Waiting
	for i := range 3 {
		waiting = append(waiting, Waiting{Pod: fmt.Sprintf("ns/a%d", i), Gang: "ns/a", Nodes: []string{"node-3", "node-4", "node-5", "node-6"}})
	}
	for i := range 3 {
		waiting = append(waiting, Waiting{Pod: fmt.Sprintf("ns/b%d", i), Gang: "ns/b", Nodes: []string{"node-7", "node-8", "node-9"}})
	}
	res := Assign(nodes, nil, 2, waiting, nil)
	if len(res.Given) != 3 {
		t.Fatalf("given %v, want gang a's 3 pods (bound 2: gang b is not started)", res.Given)
	}
	for pod := range res.Given {
		if pod[:4] != "ns/a" {
			t.Errorf("%s was given a spare; gang b was not started within the bound", pod)
		}
	}
}
