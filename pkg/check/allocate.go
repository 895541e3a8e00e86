package check

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func (r *runner) allocate(u *unit) {
	var todo []*claimEval
	pinned := ""
	for _, ce := range u.claims {
		if ce.done {
			pinned = ce.node
			continue
		}
		todo = append(todo, ce)
	}
	if len(todo) == 0 {
		return
	}
	if !r.opts.Sequential {
		r.resetState()
	}
	claims := make([]*resourceapi.ResourceClaim, len(todo))
	for i, ce := range todo {
		claims[i] = ce.claim
		if ce.invalid {
			for _, ce := range todo {
				r.unsatisfiable(ce, "the API server rejects claim "+claims[i].Namespace+"/"+claims[i].Name+" (see the findings): it is never allocated")
			}
			return
		}
	}
	for _, ce := range todo {
		for _, re := range ce.reqs {
			if re.missing || re.broken || anySub(re, func(s *reqEval) bool { return s.missing || s.broken }) {
				r.unsatisfiable(ce, "a request's DeviceClass or selectors are unusable (see the findings above): the scheduler cannot allocate this claim")
				return
			}
		}
	}
	state := structured.AllocatedState{
		AllocatedDevices:         r.state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: r.state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       r.state.AggregatedCapacity.Clone(),
	}
	alloc, err := structured.NewAllocator(r.ctx, r.feats.allocator, state, r.lister, r.inv.slices, r.celCache)
	if err != nil {
		for _, ce := range todo {
			r.unsatisfiable(ce, "the allocator cannot be created: "+err.Error())
		}
		return
	}
	for _, node := range r.inv.nodes {
		if pinned != "" && node.Name != pinned {
			continue
		}
		if !r.mayFit(todo, node.Name) {
			continue
		}
		r.report.Stats.AllocateRuns++
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.AllocateTimeout)
		results, err := safeAllocate(ctx, alloc, node, claims)
		cancel()
		if err != nil && errors.Is(err, context.DeadlineExceeded) && r.ctx.Err() == nil {
			msg := fmt.Sprintf("the allocator did not finish within %s on node %s; the scheduler gives up likewise (DRASchedulerFilterTimeout, 10s by default): too many combinations to try (large counts with constraints?)", r.opts.AllocateTimeout, node.Name)
			for _, ce := range todo {
				r.unsatisfiable(ce, msg)
				f := Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg)}
				f.Source.Line = ce.source.lineOf("devices:")
				r.addFinding(f)
			}
			return
		}
		if err != nil {
			msg := "the scheduler stops with an error on node " + node.Name + ": " + cel.EnhanceRuntimeError(err).Error()
			for _, ce := range todo {
				r.unsatisfiable(ce, msg)
				f := Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg),
					Hint: "a selector that fails on a device aborts scheduling; see the runtime-error findings"}
				f.Source.Line = ce.source.lineOf("devices:")
				r.addFinding(f)
			}
			return
		}
		if len(results) == len(todo) {
			for i, ce := range todo {
				r.record(ce, node.Name, results[i])
			}
			return
		}
	}
	r.explain(u, todo, pinned)
}

// safeAllocate turns a panic of the allocator (on input the API server
// would have rejected) into an error: gpudra check reports, never crashes.
func safeAllocate(ctx context.Context, alloc structured.Allocator, node *v1.Node, claims []*resourceapi.ResourceClaim) (results []resourceapi.AllocationResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the allocator failed on this input (it panicked: %v); the API server probably rejects one of these objects", p)
		}
	}()
	return alloc.Allocate(ctx, node, claims)
}

func anySub(re *reqEval, f func(*reqEval) bool) bool {
	for _, s := range re.sub {
		if f(s) {
			return true
		}
	}
	return false
}

func (r *runner) record(ce *claimEval, node string, res resourceapi.AllocationResult) {
	a := &Allocation{Node: node}
	for _, d := range res.Devices.Results {
		a.Devices = append(a.Devices, AllocatedDevice{Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device})
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.AdminAccess != nil && *d.AdminAccess {
			continue
		}
		switch {
		case d.ShareID != nil:
			r.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
			if d.ConsumedCapacity != nil {
				r.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
			}
		default:
			r.state.AllocatedDevices.Insert(id)
		}
		r.allocated[id] = ce.info.Name
	}
	ce.done, ce.node = true, node
	r.report.Claims[ce.idx].Allocation = a
}

func (r *runner) unsatisfiable(ce *claimEval, reasons ...string) {
	ci := &r.report.Claims[ce.idx]
	ci.Unsatisfiable = append(ci.Unsatisfiable, reasons...)
	ce.done = true
}

// free says whether device i can still be allocated (sequential mode).
func (r *runner) free(i int) bool {
	_, held := r.allocated[r.inv.devices[i].id]
	return !held
}

// mayFit is a necessary condition for the unit to fit on the node: every
// request has enough matching, free devices there. It spares the
// allocator nodes that cannot work.
func (r *runner) mayFit(claims []*claimEval, node string) bool {
	for _, ce := range claims {
		for _, re := range ce.reqs {
			if !r.requestMayFit(re, node) {
				return false
			}
		}
	}
	return true
}

func (r *runner) requestMayFit(re *reqEval, node string) bool {
	if re.sub != nil {
		for _, s := range re.sub {
			if r.requestMayFit(s, node) {
				return true
			}
		}
		return false
	}
	n := r.countOn(re.match, node, !re.admin)
	if re.mode == resourceapi.DeviceAllocationModeAll {
		return n > 0
	}
	return int64(n) >= re.count
}

// countOn counts matching devices on a node (and those reachable from
// every node); onlyFree skips devices earlier claims hold.
func (r *runner) countOn(match []bool, node string, onlyFree bool) int {
	n := 0
	for _, list := range [][]int{r.byNode[node], r.byNode[""]} {
		for _, i := range list {
			if match[i] && (!onlyFree || r.free(i)) {
				n++
			}
		}
	}
	return n
}
