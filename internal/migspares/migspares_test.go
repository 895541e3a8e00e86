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
	"maps"
	"slices"
	"testing"

	"github.com/gpudra/gpudra/internal/sparesmap"
)

// idle is n free GPUs, none publishing (a node in fleet mode with 0
// assigned).
func idle(n int) []GPU { return make([]GPU, n) }

func node(name string, gpus ...GPU) Node { return Node{Name: name, Ready: true, GPUs: gpus} }

func fleetOf(n, gpus int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = node(fmt.Sprintf("node-%d", i+1), idle(gpus)...)
	}
	return out
}

var (
	free        = GPU{}
	published   = GPU{Published: true}
	partitioned = GPU{Partitioned: true, Published: true}
	whole       = GPU{Whole: true}
	unhealthy   = GPU{Unhealthy: true}
)

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   []Node
		current Assignment
		target  Target
		// waiting are pods that fit nowhere, with the nodes each may go
		// to; given what earlier calls gave them.
		waiting []Waiting
		given   map[string]string
		// want is the assigned nodes; wantCount how many when which
		// ones does not matter.
		want          []string
		wantCount     int
		wantWithSpare int
	}{
		{
			name: "empty fleet of 100, 5%: 5 nodes", nodes: fleetOf(100, 8), target: Target{N: 5, Percent: true},
			wantCount: 5, wantWithSpare: 5,
		},
		{
			name: "small fleet: at least 2", nodes: fleetOf(10, 8), target: Target{N: 5, Percent: true},
			wantCount: 2, wantWithSpare: 2,
		},
		{
			name: "5% of 101 rounds up to 6", nodes: fleetOf(101, 8), target: Target{N: 5, Percent: true},
			wantCount: 6, wantWithSpare: 6,
		},
		{
			name: "a partitioned node first, then the most free GPUs",
			nodes: []Node{
				node("a", free, free, free, free),
				node("b", whole, whole, whole, whole, whole, whole, partitioned, free),
				node("c", free, free, free, free, free, free, free, free),
				node("d", free, free),
			},
			target: Target{N: 2}, want: []string{"b", "c"}, wantWithSpare: 2,
		},
		{
			name: "a partitioned node without a free GPU is no candidate",
			nodes: []Node{
				node("a", free),
				node("b", partitioned, whole),
				node("c", free, free),
			},
			target: Target{N: 2}, want: []string{"a", "c"}, wantWithSpare: 2,
		},
		{
			name: "an assigned node whose spare was taken is kept while it has another free GPU",
			nodes: []Node{
				node("a", partitioned, free),
				node("b", published),
				node("c", free, free, free, free),
			},
			current: Assignment{"a": 1, "b": 1},
			target:  Target{N: 2}, want: []string{"a", "b"}, wantWithSpare: 2,
		},
		{
			name: "an assigned node whose spare was taken, with no other free GPU, is dropped and replaced",
			nodes: []Node{
				node("a", partitioned, whole),
				node("b", published),
				node("c", free, free, free, free),
			},
			current: Assignment{"a": 1, "b": 1},
			target:  Target{N: 2}, want: []string{"b", "c"}, wantWithSpare: 2,
		},
		{
			name: "an assignment not acted on yet counts: not made twice",
			nodes: []Node{
				node("a", free),
				node("b", free, free, free, free, free, free, free, free),
				node("c", free, free, free, free, free, free, free),
			},
			current: Assignment{"a": 1},
			target:  Target{N: 2}, want: []string{"a", "b"}, wantWithSpare: 2,
		},
		{
			name: "sticky published spares count, and no assignment is added for them",
			nodes: []Node{
				node("a", partitioned, published),
				node("b", published, free),
				node("c", free, free, free, free),
				node("d", free, free, free, free),
			},
			target: Target{N: 2}, want: []string{}, wantWithSpare: 2,
		},
		{
			name: "one sticky spare: one assignment beside it",
			nodes: []Node{
				node("a", published),
				node("b", free, free),
				node("c", free, free, free),
			},
			target: Target{N: 2}, want: []string{"c"}, wantWithSpare: 2,
		},
		{
			name: "nodes not ready are skipped, and their assignments dropped",
			nodes: []Node{
				{Name: "a", GPUs: []GPU{published, free, free, free, free, free, free, free}},
				{Name: "b", GPUs: []GPU{free, free, free, free, free, free, free, free}},
				node("c", free),
				node("d", free),
			},
			current: Assignment{"a": 1},
			target:  Target{N: 2}, want: []string{"c", "d"}, wantWithSpare: 2,
		},
		{
			name: "nodes gone lose their assignment",
			nodes: []Node{
				node("a", free),
				node("b", free),
			},
			current: Assignment{"gone": 1, "a": 1},
			target:  Target{N: 2}, want: []string{"a", "b"}, wantWithSpare: 2,
		},
		{
			name: "unhealthy and held GPUs are not free",
			nodes: []Node{
				node("a", unhealthy, whole),
				node("b", unhealthy.withPublished()),
				node("c", free),
			},
			current: Assignment{"a": 1},
			target:  Target{N: 2}, want: []string{"c"}, wantWithSpare: 1,
		},
		{
			name: "target larger than the nodes: every node that can",
			nodes: []Node{
				node("a", free),
				node("b", whole),
				node("c", free, free),
			},
			target: Target{N: 10}, want: []string{"a", "c"}, wantWithSpare: 2,
		},
		{
			name: "too many: the unpublished assignment goes first, least preferred",
			nodes: []Node{
				node("a", published),
				node("b", published),
				node("c", free, free, free),
				node("d", free),
			},
			current: Assignment{"a": 1, "b": 1, "c": 1, "d": 1},
			target:  Target{N: 3}, want: []string{"a", "b", "c"}, wantWithSpare: 3,
		},
		{
			name: "target lowered: assignments beyond it dropped, their published spares stay",
			nodes: []Node{
				node("a", partitioned, published),
				node("b", published, free),
				node("c", published),
			},
			current: Assignment{"a": 1, "b": 1, "c": 1},
			target:  Target{N: 2}, want: []string{"a", "b"}, wantWithSpare: 3,
		},
		{
			name: "kept assignments are written as 1, whatever the value read",
			nodes: []Node{
				node("a", free, free),
				node("b", free),
			},
			current: Assignment{"a": 2147483647},
			target:  Target{N: 2}, want: []string{"a", "b"}, wantWithSpare: 2,
		},
		{
			name: "off", nodes: fleetOf(10, 8), current: Assignment{"node-1": 1}, target: Target{},
			want: []string{}, wantWithSpare: 0,
		},
		{
			name: "a pod that may only go to a node without a spare gets one there, over the target",
			nodes: []Node{
				node("dgx-1", free, free, free, free, free, free, free, published),
				node("dgx-2", free, free, free, free, free, free, free, published),
				node("mixed", free, free),
			},
			current: Assignment{"dgx-1": 1, "dgx-2": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"mixed"}}},
			want:    []string{"dgx-1", "dgx-2", "mixed"}, wantWithSpare: 3,
		},
		{
			name: "a pod that may go anywhere but fits nowhere: a node without a spare gets one (the spares it could reach did not help)",
			nodes: []Node{
				node("dgx-1", free, free, free, free, free, free, free, published),
				node("dgx-2", free, free, free, free, free, free, free, published),
				node("mixed", free, free),
			},
			current: Assignment{"dgx-1": 1, "dgx-2": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/l4-and-mig", Nodes: []string{"dgx-1", "dgx-2", "mixed"}}},
			want:    []string{"dgx-1", "dgx-2", "mixed"}, wantWithSpare: 3,
		},
		{
			name: "a pod given a spare before gets no second one, and keeps the first while it waits",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", free, published),
				node("d", free, free),
			},
			current: Assignment{"a": 1, "b": 1, "c": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/hopeless", Nodes: []string{"c", "d"}}},
			given:   map[string]string{"ns/hopeless": "c"},
			want:    []string{"a", "b", "c"}, wantWithSpare: 3,
		},
		{
			name: "a pod whose given node filled up is given another",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", whole, whole),
				node("d", free, free),
			},
			current: Assignment{"a": 1, "b": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"c", "d"}}},
			given:   map[string]string{"ns/p": "c"},
			want:    []string{"a", "b", "d"}, wantWithSpare: 3,
		},
		{
			name: "the waiting pod's node is kept when spares are over the target, others go",
			nodes: []Node{
				node("a", partitioned, free, published),
				node("b", free, free, free, published),
				node("c", free, published),
				node("d", free, free),
			},
			current: Assignment{"a": 1, "b": 1, "c": 1, "d": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"d"}}},
			given:   map[string]string{"ns/p": "d"},
			want:    []string{"a", "b", "d"}, wantWithSpare: 4,
		},
		{
			name: "a pod whose nodes have no free GPU: nothing a spare can do",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", whole, whole),
			},
			current: Assignment{"a": 1, "b": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"c"}}, {Pod: "ns/q", Nodes: nil}},
			want:    []string{"a", "b"}, wantWithSpare: 2,
		},
		{
			name: "two pods for one node: one spare",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", free, free),
			},
			current: Assignment{"a": 1, "b": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"c"}}, {Pod: "ns/q", Nodes: []string{"c"}}},
			want:    []string{"a", "b", "c"}, wantWithSpare: 3,
		},
		{
			name: "waiting pods hold at most the target's nodes over the target",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", free, free),
				node("d", free, free),
				node("e", free, free),
				node("f", free, free),
			},
			current: Assignment{"a": 1, "b": 1}, target: Target{N: 2},
			waiting:   []Waiting{{Pod: "ns/p", Nodes: []string{"c"}}, {Pod: "ns/q", Nodes: []string{"d"}}, {Pod: "ns/r", Nodes: []string{"e"}}, {Pod: "ns/s", Nodes: []string{"f"}}},
			wantCount: 4, wantWithSpare: 4,
		},
		{
			name: "a pod that keeps its node is served before new ones under the bound",
			nodes: []Node{
				node("a", free, published),
				node("b", free, published),
				node("c", free, free),
				node("d", free, free),
				node("e", free, free),
			},
			current: Assignment{"a": 1, "b": 1, "e": 1}, target: Target{N: 2},
			waiting: []Waiting{{Pod: "ns/p", Nodes: []string{"c"}}, {Pod: "ns/q", Nodes: []string{"d"}}, {Pod: "ns/r", Nodes: []string{"e"}}},
			given:   map[string]string{"ns/r": "e"},
			want:    []string{"a", "b", "c", "e"}, wantWithSpare: 4,
		},
		{
			name: "pods gone: the nodes given to them are given back first, before less preferred ones",
			nodes: []Node{
				node("a", free, published),
				node("b", free, free, published),
				node("c", partitioned, free, published),
			},
			current: Assignment{"a": 1, "b": 1, "c": 1}, target: Target{N: 2},
			given: map[string]string{"ns/gone": "c"},
			want:  []string{"a", "b"}, wantWithSpare: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.target.Nodes(CanPartition(tc.nodes))
			got := Assign(tc.nodes, tc.current, n, tc.waiting, tc.given)
			names := slices.Sorted(maps.Keys(got.Assignment))
			if tc.want != nil {
				if !slices.Equal(names, tc.want) {
					t.Errorf("assigned %v, want %v", names, tc.want)
				}
			} else if len(names) != tc.wantCount {
				t.Errorf("assigned %d nodes (%v), want %d", len(names), names, tc.wantCount)
			}
			if got.WithSpare != tc.wantWithSpare {
				t.Errorf("%d nodes with a spare, want %d", got.WithSpare, tc.wantWithSpare)
			}
			for name, v := range got.Assignment {
				if v != sparesmap.Own {
					t.Errorf("%s assigned %d, want %d", name, v, sparesmap.Own)
				}
			}
			// Stable: the same view gives the same assignment, and it
			// is a fixed point.
			if again := Assign(tc.nodes, got.Assignment, n, tc.waiting, got.Given); !maps.Equal(again.Assignment, got.Assignment) {
				t.Errorf("not a fixed point: %v, then %v", got.Assignment, again.Assignment)
			}
		})
	}
}

func (g GPU) withPublished() GPU { g.Published = true; return g }

// TestAssignSpreads: the nodes a fleet of equal nodes gets are not the
// first by name (a rack), and do not depend on the order of the view.
func TestAssignSpreads(t *testing.T) {
	nodes := fleetOf(100, 8)
	a := Assign(nodes, nil, 5, nil, nil).Assignment
	slices.Reverse(nodes)
	b := Assign(nodes, nil, 5, nil, nil).Assignment
	if !maps.Equal(a, b) {
		t.Errorf("the order of the view changed the assignment: %v, %v", a, b)
	}
	first := 0
	for i := 1; i <= 5; i++ {
		if a[fmt.Sprintf("node-%d", i)] > 0 {
			first++
		}
	}
	if first == 5 {
		t.Errorf("assigned the first five nodes by name: %v", a)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Target
		wantErr bool
	}{
		{"5%", Target{N: 5, Percent: true}, false},
		{" 10 % ", Target{N: 10, Percent: true}, false},
		{"3", Target{N: 3}, false},
		{"0", Target{}, false},
		{"100%", Target{N: 100, Percent: true}, false},
		{"101%", Target{}, true},
		{"-1", Target{}, true},
		{"five", Target{}, true},
		{"", Target{}, true},
	} {
		got, err := ParseTarget(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestTargetNodes(t *testing.T) {
	for _, tc := range []struct {
		target       Target
		canPartition int
		want         int
	}{
		{Target{N: 5, Percent: true}, 100, 5},
		{Target{N: 5, Percent: true}, 1000, 50},
		{Target{N: 5, Percent: true}, 21, 2},
		{Target{N: 5, Percent: true}, 41, 3},
		{Target{N: 5, Percent: true}, 1, 1},
		{Target{N: 5, Percent: true}, 0, 0},
		{Target{N: 1}, 10, 2},
		{Target{N: 7}, 10, 7},
		{Target{N: 7}, 3, 3},
		{Target{}, 100, 0},
		{Target{Percent: true}, 100, 0},
	} {
		if got := tc.target.Nodes(tc.canPartition); got != tc.want {
			t.Errorf("%s of %d: %d, want %d", tc.target, tc.canPartition, got, tc.want)
		}
	}
}
