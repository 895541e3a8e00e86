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
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// DefaultFilterTimeout bounds one allocator call on one node, as the
// scheduler's DRASchedulerFilterTimeout does by default.
const DefaultFilterTimeout = 10 * time.Second

// Scheduler does offline what the scheduler's DRA plugin does for a pod:
// it allocates all the pod's unallocated claims together, with the real
// allocator, on the first node where they fit.
type Scheduler struct {
	features Features
	classes  *Classes
	slices   []*resourceapi.ResourceSlice
	nodes    []*v1.Node
	// taintRules taint devices (DRADeviceTaintRules); already applied to
	// slices.
	taintRules []*resourceapi.DeviceTaintRule
	// slicesFor, set by NewOver, gives the slices the allocator reads on
	// one node; slices is then empty.
	slicesFor func(node string) []*resourceapi.ResourceSlice
	// index is slices by the node the allocator reads them on (without
	// slicesFor), rebuilt whenever slices change.
	index    *sliceIndex
	celCache *cel.Cache
	// FilterTimeout bounds one allocator call on one node (default
	// DefaultFilterTimeout).
	FilterTimeout time.Duration
}

// New returns a scheduler for an inventory. With DRADeviceTaintRules
// enabled, the taint rules taint the devices they select, as the
// scheduler's view of the slices does.
func New(features Features, classes *Classes, slices []*resourceapi.ResourceSlice, taintRules []*resourceapi.DeviceTaintRule) *Scheduler {
	if !features.DeviceTaintRules {
		taintRules = nil
	}
	if len(taintRules) > 0 {
		slices = ApplyTaintRules(slices, taintRules)
	}
	return &Scheduler{
		features:      features,
		classes:       classes,
		slices:        slices,
		index:         newSliceIndex(slices),
		nodes:         NodesOf(slices),
		taintRules:    taintRules,
		celCache:      cel.NewCache(1000, features.CEL),
		FilterTimeout: DefaultFilterTimeout,
	}
}

// NewOver returns a scheduler over an inventory kept elsewhere, in a form
// of its own: the nodes it names, and for each node the slices the
// allocator reads there (the node's own and those of no one node), built
// when the scheduler asks about that node. The allocator never reads
// another node's slices, so a fleet need not exist in full at once.
func NewOver(features Features, classes *Classes, nodes []string, slicesFor func(node string) []*resourceapi.ResourceSlice, taintRules []*resourceapi.DeviceTaintRule) *Scheduler {
	s := New(features, classes, nil, taintRules)
	s.nodes = NodesNamed(nodes)
	s.slicesFor = slicesFor
	return s
}

// NodeSlices are the slices local to one node (spec.nodeName), as the
// scheduler holds them.
func (s *Scheduler) NodeSlices(node string) []*resourceapi.ResourceSlice {
	var all []*resourceapi.ResourceSlice
	if s.slicesFor != nil {
		all = s.slicesFor(node)
	} else {
		all = s.index.byNode[node]
	}
	var out []*resourceapi.ResourceSlice
	for _, sl := range all {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == node {
			out = append(out, sl)
		}
	}
	return out
}

// ReplaceNodeSlices replaces the slices local to one node (spec.nodeName)
// with slices: what the node publishes after a change, such as gpudra's
// plugin republishing once claims are prepared on it. The taint rules the
// scheduler was given taint them too; the nodes tried, and their order,
// stay.
func (s *Scheduler) ReplaceNodeSlices(node string, slices []*resourceapi.ResourceSlice) {
	if s.slicesFor != nil {
		// The allocator reads the node's own slices through slicesFor,
		// and the taint rules are applied there.
		others := s.slicesFor
		s.slicesFor = func(n string) []*resourceapi.ResourceSlice {
			all := others(n)
			if n != node {
				return all
			}
			out := make([]*resourceapi.ResourceSlice, 0, len(all)+len(slices))
			for _, sl := range all {
				if sl.Spec.NodeName == nil || *sl.Spec.NodeName != node {
					out = append(out, sl)
				}
			}
			return append(out, slices...)
		}
		return
	}
	if s.features.DeviceTaintRules && len(s.taintRules) > 0 {
		slices = ApplyTaintRules(slices, s.taintRules)
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(s.slices))
	for _, sl := range s.slices {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName != node {
			out = append(out, sl)
		}
	}
	s.slices = append(out, slices...)
	if !s.index.replaceNode(node, slices) {
		s.index = newSliceIndex(s.slices)
	}
}

// Features returns the feature set the scheduler uses.
func (s *Scheduler) Features() Features { return s.features }

// Classes returns the DeviceClasses the scheduler sees.
func (s *Scheduler) Classes() *Classes { return s.classes }

// Slices returns the inventory, with the taint rules applied.
func (s *Scheduler) Slices() []*resourceapi.ResourceSlice { return s.slices }

// Nodes returns the nodes of the inventory (NodesOf), in the order they
// are tried.
func (s *Scheduler) Nodes() []*v1.Node { return s.nodes }

// CELCache is the cache of compiled selectors the allocator uses.
func (s *Scheduler) CELCache() *cel.Cache { return s.celCache }

// ErrUnschedulable means no node has devices for all of a pod's claims
// together: the pod stays Pending.
var ErrUnschedulable = errors.New("cannot allocate all claims")

// FilterError means the allocator failed on a node rather than finding no
// devices: a selector that fails at run time, input the API server would
// have rejected, or the filter timeout. The scheduler stops trying the pod
// with this error.
type FilterError struct {
	Node    string
	Timeout bool
	Err     error
}

func (e *FilterError) Error() string {
	if e.Timeout {
		return fmt.Sprintf("node %s: the allocator did not finish within the filter timeout: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("node %s: %v", e.Node, e.Err)
}

func (e *FilterError) Unwrap() error { return e.Err }

// Placement is where a pod's claims fit.
type Placement struct {
	Node *v1.Node
	// Results holds, for each claim passed to Schedule, its allocation,
	// or nil for a claim that was allocated already.
	Results []*resourceapi.AllocationResult
	// Tried counts the nodes the allocator ran on.
	Tried int
}

// Schedule finds the first node, in Nodes order, on which all of a pod's
// claims fit, as the scheduler's Filter does for each node: claims that
// are allocated already (shared with a running pod) restrict the nodes to
// those their allocation is available on, and the others are allocated
// together, against the devices state holds. candidate, if set, skips
// nodes that cannot fit anyway, sparing the allocator. It returns
// ErrUnschedulable when no node fits, or a *FilterError when the allocator
// fails, which stops the search as it stops the scheduler.
func (s *Scheduler) Schedule(ctx context.Context, state *State, claims []*resourceapi.ResourceClaim, candidate func(*v1.Node) bool) (*Placement, error) {
	var pending []*resourceapi.ResourceClaim
	var selectors []*nodeaffinity.NodeSelector
	for _, c := range claims {
		if c.Status.Allocation == nil {
			pending = append(pending, c)
			continue
		}
		if sel := c.Status.Allocation.NodeSelector; sel != nil {
			ns, err := nodeaffinity.NewNodeSelector(sel)
			if err != nil {
				return nil, fmt.Errorf("claim %s/%s: allocation's node selector: %w", c.Namespace, c.Name, err)
			}
			selectors = append(selectors, ns)
		}
	}
	place := &Placement{Results: make([]*resourceapi.AllocationResult, len(claims))}
	if err := s.classesExist(pending); err != nil {
		return place, err
	}
	// The allocator only reads the allocated state, so one copy serves
	// every node tried.
	var allocated *structured.AllocatedState
	for _, node := range s.nodes {
		if !matchesAll(selectors, node) || candidate != nil && !candidate(node) {
			continue
		}
		if len(pending) == 0 {
			place.Node = node
			return place, nil
		}
		if allocated == nil {
			a := state.allocated()
			allocated = &a
		}
		alloc, err := s.allocatorOn(ctx, *allocated, node.Name)
		if err != nil {
			return nil, err
		}
		place.Tried++
		results, err := s.Filter(ctx, alloc, node, pending)
		if err != nil {
			return place, err
		}
		if len(results) != len(pending) {
			continue
		}
		place.Node = node
		i := 0
		for j, c := range claims {
			if c.Status.Allocation == nil {
				place.Results[j] = &results[i]
				i++
			}
		}
		return place, nil
	}
	return place, ErrUnschedulable
}

// classesExist checks what the scheduler's PreFilter checks: every request
// names a DeviceClass that exists. One that does not leaves the pod
// unschedulable until the class appears.
func (s *Scheduler) classesExist(claims []*resourceapi.ResourceClaim) error {
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			names := []string{}
			if r.Exactly != nil {
				names = append(names, r.Exactly.DeviceClassName)
			}
			for _, sub := range r.FirstAvailable {
				names = append(names, sub.DeviceClassName)
			}
			for _, n := range names {
				if _, err := s.classes.Get(n); err != nil {
					return fmt.Errorf("claim %s/%s: request %s: device class %s does not exist: %w", c.Namespace, c.Name, r.Name, n, ErrUnschedulable)
				}
			}
		}
	}
	return nil
}

func matchesAll(selectors []*nodeaffinity.NodeSelector, node *v1.Node) bool {
	for _, s := range selectors {
		if !s.Match(node) {
			return false
		}
	}
	return true
}

// AllocatorFor returns the allocator for Filter calls on one node: one
// over the slices the allocator reads there (the node's own, the rest of
// their pools, and those of no one node), from the inventory or, for a
// scheduler NewOver made, from its slicesFor, with the same taint rules
// and selector cache.
func (s *Scheduler) AllocatorFor(ctx context.Context, state *State, node string) (structured.Allocator, error) {
	return s.allocatorOn(ctx, state.allocated(), node)
}

func (s *Scheduler) allocatorOn(ctx context.Context, allocated structured.AllocatedState, node string) (structured.Allocator, error) {
	var slices []*resourceapi.ResourceSlice
	if s.slicesFor != nil {
		slices = s.slicesFor(node)
		if len(s.taintRules) > 0 {
			slices = ApplyTaintRules(slices, s.taintRules)
		}
	} else {
		// s.slices have the taint rules applied already (New).
		slices = s.index.forNode(node)
	}
	alloc, err := structured.NewAllocator(ctx, s.features.Allocator, allocated, s.classes, slices, s.celCache)
	if err != nil {
		return nil, fmt.Errorf("create the allocator: %w", err)
	}
	return alloc, nil
}

// AllocatorEdited is AllocatorFor with the node's own slices (those local
// to it, spec.nodeName) replaced by what edit makes of them: what the
// allocator would see once the node publishes something it does not yet
// (gpudra-controller asks whether a MIG spare there would let a waiting
// pod in). The taint rules apply to the edited slices too; edit may not
// change the slices it is given, only return others.
func (s *Scheduler) AllocatorEdited(ctx context.Context, state *State, node string, edit func([]*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice) (structured.Allocator, error) {
	var all []*resourceapi.ResourceSlice
	if s.slicesFor != nil {
		all = s.slicesFor(node)
	} else {
		all = s.index.forNode(node)
	}
	var local, slices []*resourceapi.ResourceSlice
	for _, sl := range all {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == node {
			local = append(local, sl)
		} else {
			slices = append(slices, sl)
		}
	}
	edited := edit(local)
	if s.slicesFor == nil && len(s.taintRules) > 0 {
		// s.slices have the rules applied already (New).
		edited = ApplyTaintRules(edited, s.taintRules)
	}
	slices = append(slices, edited...)
	if s.slicesFor != nil && len(s.taintRules) > 0 {
		slices = ApplyTaintRules(slices, s.taintRules)
	}
	alloc, err := structured.NewAllocator(ctx, s.features.Allocator, state.allocated(), s.classes, slices, s.celCache)
	if err != nil {
		return nil, fmt.Errorf("create the allocator: %w", err)
	}
	return alloc, nil
}

// Filter allocates claims together on one node, bounded by FilterTimeout.
// Fewer results than claims (none) means they do not fit there. An error
// is a *FilterError; a panic of the allocator (on input the API server
// would have rejected) is one too, never a crash.
func (s *Scheduler) Filter(ctx context.Context, alloc structured.Allocator, node *v1.Node, claims []*resourceapi.ResourceClaim) (results []resourceapi.AllocationResult, err error) {
	timeout := s.FilterTimeout
	if timeout <= 0 {
		timeout = DefaultFilterTimeout
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			results, err = nil, &FilterError{Node: node.Name, Err: fmt.Errorf("the allocator failed on this input (it panicked: %v); the API server probably rejects one of these objects", p)}
		}
	}()
	results, err = alloc.Allocate(fctx, node, claims)
	switch {
	case err == nil:
		return results, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, &FilterError{Node: node.Name, Timeout: true, Err: err}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, &FilterError{Node: node.Name, Err: cel.EnhanceRuntimeError(err)}
}
