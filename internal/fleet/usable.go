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
	"context"
	"errors"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// strandRun is one computation's state past the inputs: what is free, and
// which of it some waiting workload would use.
type strandRun struct {
	sched   *scheduler.Scheduler
	classes *scheduler.Classes
	inv     inventory
	// state is what the claims hold already, for the allocator.
	state *scheduler.State
	// free are the free GPUs by node, byUUID every whole GPU (freeGPUs).
	free   map[string][]*Device
	byUUID map[string]*Device
	// classOf is each node's class (nodeclass.go): the allocator's answer
	// on one node holds for every node of its class.
	classOf map[string]string
	// usable are the free GPUs some waiting workload would use.
	usable map[*Device]bool
	// outOfService says whether a DeviceTaintRule keeps pods off the GPU
	// (ruleTainted): never stranded.
	outOfService func(*Device) bool
	out          *Stranding
	// fit is what helpedBySpare reuses (sparefit.go); nil until asked.
	fit *spareFit
	// allocators are the nodes' allocators useShape keeps (allocatorFor).
	allocators map[string]structured.Allocator
}

// ruleTainted says whether one of the DeviceTaintRules the scheduler
// applies (in.Features: DRADeviceTaintRules) taints a device with an
// effect that keeps pods off it (NoSchedule, NoExecute; None only marks).
func ruleTainted(in Inputs) func(*Device) bool {
	features := in.Features
	if features.Version == "" {
		features = scheduler.DefaultFeatures()
	}
	var rules []*resourceapi.DeviceTaintRule
	if features.DeviceTaintRules {
		for _, r := range in.TaintRules {
			if e := r.Spec.Taint.Effect; e == resourceapi.DeviceTaintEffectNoSchedule || e == resourceapi.DeviceTaintEffectNoExecute {
				rules = append(rules, r)
			}
		}
	}
	return func(d *Device) bool {
		return slices.ContainsFunc(rules, func(r *resourceapi.DeviceTaintRule) bool {
			return scheduler.RuleSelects(r.Spec.DeviceSelector, in.DriverName, d.ID.Pool, d.ID.Device)
		})
	}
}

// useShape finds whether a shape (rep is one of its pods) fits on some
// node, and marks the free GPUs its largest fit on each node would use.
// Nodes where it may not go or that have nothing free are skipped, and,
// once it fits somewhere, nodes whose free GPUs are all usable already:
// asking there would change nothing. open are the nodes it may go to that
// have a free GPU.
func (r *strandRun) useShape(ctx context.Context, rep pendingPod) (fits bool, open []string, err error) {
	// A selector that reads an identity (a UUID, a PCI address) can answer
	// differently on nodes alike: then every node is asked.
	perNode := readsIdentities(rep, r.classes)
	type answer struct {
		fits bool
		// names are the whole GPUs used, by device name: the same on
		// every node of a class.
		names []string
	}
	answers := map[string]answer{} // by node class
	for _, node := range r.sched.Nodes() {
		if err := ctx.Err(); err != nil {
			return false, nil, err
		}
		candidates := r.free[node.Name]
		if !rep.fitsNode(node) || len(candidates) == 0 {
			continue
		}
		if !fits {
			open = append(open, node.Name)
		}
		if fits && allUsable(candidates, r.usable) {
			continue
		}
		a, known := answers[r.classOf[node.Name]]
		if !known || perNode {
			allocator, err := r.allocatorFor(ctx, node.Name)
			if err != nil {
				return false, nil, err
			}
			used, ok := largestFit(ctx, r.sched, allocator, node, rep, len(candidates), r.out)
			a = answer{fits: ok, names: r.wholeGPUNames(used)}
			answers[r.classOf[node.Name]] = a
		}
		if !a.fits {
			continue
		}
		fits = true
		for _, name := range a.names {
			if d, ok := r.inv.lookup(DeviceID{Pool: node.Name, Device: name}); ok {
				r.usable[d] = true
			}
		}
	}
	if fits {
		open = nil
	}
	return fits, open, nil
}

// maxAllocators bounds how many nodes' allocators one computation keeps
// for the next shapes (each holds its node's slices): nodes alike are
// asked once per shape, on the first of them it may go to, mostly the
// same few nodes.
const maxAllocators = 16

// allocatorFor is the allocator over a node's slices and what the claims
// hold (scheduler.AllocatorFor), kept for the next shapes asked there.
func (r *strandRun) allocatorFor(ctx context.Context, node string) (structured.Allocator, error) {
	if a, ok := r.allocators[node]; ok {
		return a, nil
	}
	a, err := r.sched.AllocatorFor(ctx, r.state, node)
	if err != nil {
		return nil, err
	}
	if r.allocators == nil {
		r.allocators = map[string]structured.Allocator{}
	}
	if len(r.allocators) < maxAllocators {
		r.allocators[node] = a
	}
	return a, nil
}

// wholeGPUNames turns what an allocation uses into the names of the whole
// GPUs it uses, on its node: a MIG partition uses its parent.
func (r *strandRun) wholeGPUNames(used []DeviceID) []string {
	var names []string
	for _, id := range used {
		if d, ok := r.wholeGPU(id); ok {
			names = append(names, d.ID.Device)
		}
	}
	return names
}

// wholeGPU is the whole GPU a device is or is a MIG partition of.
func (r *strandRun) wholeGPU(id DeviceID) (*Device, bool) {
	d, ok := r.inv.lookup(id)
	if ok && d.Type == slicebuilder.TypeMIG {
		d, ok = r.byUUID[d.ParentUUID]
	}
	return d, ok
}

// openNodes are the nodes a pod may go to that have a free GPU, in the
// scheduler's order (useShape finds them for a lone pod on the way).
func (r *strandRun) openNodes(p pendingPod) []string {
	var open []string
	for _, node := range r.sched.Nodes() {
		if p.fitsNode(node) && len(r.free[node.Name]) > 0 {
			open = append(open, node.Name)
		}
	}
	return open
}

// useGang places a gang's waiting pods together (placeGang) and, if all of
// them fit, marks the GPUs they would take usable; if one does not, none
// are: a gang runs whole or not at all.
func (r *strandRun) useGang(ctx context.Context, members []pendingPod) (bool, error) {
	used, ok, err := placeGang(ctx, r.sched, r.state, members, r.free, r.out)
	if err != nil || !ok {
		return false, err
	}
	for _, id := range used {
		if d, ok := r.wholeGPU(id); ok {
			r.usable[d] = true
		}
	}
	return true, nil
}

// countStranded counts every free GPU no waiting workload would use.
func (r *strandRun) countStranded() {
	for _, devs := range r.free {
		for _, d := range devs {
			if !r.usable[d] && !r.outOfService(d) {
				r.out.Stranded[GPUKey{Node: d.Node, Model: d.Model}]++
			}
		}
	}
}

// readsIdentities reports whether a pod's selectors (its requests' and
// their classes') read an identity attribute: then the allocator's answer
// on one node says nothing about a node alike but for identities.
func readsIdentities(p pendingPod, classes *scheduler.Classes) bool {
	exprs := func(sel []resourceapi.DeviceSelector) bool {
		return slices.ContainsFunc(sel, func(s resourceapi.DeviceSelector) bool { return s.CEL != nil && readsIdentity(s.CEL.Expression) })
	}
	classReads := func(name string) bool {
		c, err := classes.Get(name)
		return err == nil && exprs(c.Spec.Selectors)
	}
	for _, c := range p.claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil && (exprs(r.Exactly.Selectors) || classReads(r.Exactly.DeviceClassName)) {
				return true
			}
			for _, sub := range r.FirstAvailable {
				if exprs(sub.Selectors) || classReads(sub.DeviceClassName) {
					return true
				}
			}
		}
	}
	return false
}

func allUsable(devs []*Device, usable map[*Device]bool) bool {
	for _, d := range devs {
		if !usable[d] {
			return false
		}
	}
	return true
}

// largestFit places as many copies of the pod's claims as fit on the node,
// at most maxCopies, and returns the devices of this driver the largest
// fit uses.
func largestFit(ctx context.Context, sched *scheduler.Scheduler, alloc structured.Allocator, node *corev1.Node, p pendingPod, maxCopies int, out *Stranding) ([]DeviceID, bool) {
	best, ok := tryCopies(ctx, sched, alloc, node, p, 1, out)
	if !ok {
		return nil, false
	}
	if maxCopies <= 1 {
		return best, true
	}
	if used, ok := tryCopies(ctx, sched, alloc, node, p, maxCopies, out); ok {
		return used, true
	}
	// Fits once, not maxCopies times: the largest k in between.
	lo, hi := 1, maxCopies-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if used, ok := tryCopies(ctx, sched, alloc, node, p, mid, out); ok {
			lo, best = mid, used
		} else {
			hi = mid - 1
		}
	}
	return best, true
}

// tryCopies allocates k copies of the pod's claims together on the node and
// returns the devices the allocation holds.
func tryCopies(ctx context.Context, sched *scheduler.Scheduler, alloc structured.Allocator, node *corev1.Node, p pendingPod, k int, out *Stranding) ([]DeviceID, bool) {
	var claims []*resourceapi.ResourceClaim
	for copyIdx := range k {
		for _, c := range p.claims {
			if c.Status.Allocation != nil {
				continue // shared and allocated: not copied, not held again
			}
			cp := c.DeepCopy()
			cp.UID = types.UID(string(c.UID) + "-copy-" + strconv.Itoa(copyIdx))
			cp.Name = c.Name + "-copy-" + strconv.Itoa(copyIdx)
			claims = append(claims, cp)
		}
	}
	if len(claims) == 0 {
		return nil, false
	}
	out.Filters++
	results, err := sched.Filter(ctx, alloc, node, claims)
	var ferr *scheduler.FilterError
	if err != nil && !errors.As(err, &ferr) {
		return nil, false
	}
	if err != nil || len(results) != len(claims) {
		return nil, false
	}
	var used []DeviceID
	for _, r := range results {
		for _, d := range r.Devices.Results {
			if d.AdminAccess == nil || !*d.AdminAccess {
				used = append(used, DeviceID{Pool: d.Pool, Device: d.Device})
			}
		}
	}
	return used, true
}

// placeGang places a gang's waiting pods together, as the scheduler's
// pod-group cycle does: each on the first node where it fits, seeing what
// the gang's earlier pods took, a claim they share (the PodGroup's)
// allocated once. It returns the devices the gang would take, or false
// when one of its pods fits nowhere.
func placeGang(ctx context.Context, sched *scheduler.Scheduler, base *scheduler.State, members []pendingPod, free map[string][]*Device, out *Stranding) ([]DeviceID, bool, error) {
	state := base.Clone()
	placed := map[*resourceapi.ResourceClaim]*resourceapi.ResourceClaim{} // claims the gang allocated so far, by the pods' claim
	var used []DeviceID
	for _, p := range members {
		claims := make([]*resourceapi.ResourceClaim, len(p.claims))
		for i, c := range p.claims {
			if a, ok := placed[c]; ok {
				c = a
			}
			claims[i] = c
		}
		place, err := sched.Schedule(ctx, state, claims, func(n *corev1.Node) bool { return p.fitsNode(n) && len(free[n.Name]) > 0 })
		if place != nil {
			out.Filters += place.Tried
		}
		var ferr *scheduler.FilterError
		switch {
		case errors.Is(err, scheduler.ErrUnschedulable), errors.As(err, &ferr):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		for i, res := range place.Results {
			if res == nil {
				continue
			}
			c := claims[i].DeepCopy()
			c.Status.Allocation = res
			placed[p.claims[i]] = c
			state.Add(c.Namespace+"/"+c.Name, res)
			for _, d := range res.Devices.Results {
				if d.AdminAccess == nil || !*d.AdminAccess {
					used = append(used, DeviceID{Pool: d.Pool, Device: d.Device})
				}
			}
		}
	}
	return used, true, nil
}
