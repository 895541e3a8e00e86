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

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/spareedit"
)

// Where a MIG spare would let a pod in (Stranding.Unplaced). A pod that
// fits on no node now is given a spare (gpudra-controller, package
// migspares) only on a node where the real allocator says its claims fit
// once that node publishes one more free GPU's MIG placements: the node's
// slices are edited as its plugin would publish them with a spare (the
// highest free partitionable GPU's counter set and placements, copied
// from a GPU of the same model that publishes them somewhere in the
// fleet, with the attributes of the spare GPU that its partitions carry,
// and its whole device consuming the counter set) and the pod's
// claims are allocated on them. A pod that asks for something no MIG
// spare gives (nine whole GPUs on an eight-GPU node, a model the node
// lacks) is helped nowhere, and costs no spare. When no GPU of the model
// publishes placements anywhere, what a spare would publish is unknown:
// the node counts as helped (the policy bounds how many spares waiting
// pods hold).
//
// What it costs a recompute (BenchmarkRecomputeUnplaced): the allocator
// is not asked for a pod none of whose requests can take a placement
// (mayUsePlacement: nine whole GPUs), each node's spare GPU is found
// once, and the allocators over the nodes asked first, with a spare, are
// kept for the next pods.

// spareFit is what the spare fit (template, spareGPU and the methods
// after them) reuses across the pods of one computation.
type spareFit struct {
	// published are the GPUs (by UUID) whose placements are published.
	published map[string]bool
	// templates by model; nil for a model no GPU publishes placements of.
	templates map[string]*spareedit.Template
	nodes     map[string]*corev1.Node
	// spares are each node's spareGPU, nil for none, once asked.
	spares map[string]*Device
	// edited are the allocators over nodes' slices with a spare, by
	// node, for the pods after the first asked there (at most
	// maxEditedAllocators: each holds its node's slices).
	edited map[string]structured.Allocator
}

// maxEditedAllocators bounds how many nodes' edited allocators one
// computation keeps for the next pods: nodes alike are asked once per pod,
// on the first of them the pod may go to, mostly the same few nodes.
const maxEditedAllocators = 16

func (r *strandRun) spareFit() *spareFit {
	if r.fit != nil {
		return r.fit
	}
	f := &spareFit{published: map[string]bool{}, templates: map[string]*spareedit.Template{}, nodes: map[string]*corev1.Node{},
		spares: map[string]*Device{}, edited: map[string]structured.Allocator{}}
	for _, d := range r.inv.devices {
		if d.Type == slicebuilder.TypeMIG && d.ParentUUID != "" {
			f.published[d.ParentUUID] = true
		}
	}
	for _, n := range r.sched.Nodes() {
		f.nodes[n.Name] = n
	}
	r.fit = f
	return f
}

// template finds a GPU of the model whose placements are published, a
// free one first, and reads it from its node's slices.
func (r *strandRun) template(model string) *spareedit.Template {
	f := r.spareFit()
	if t, ok := f.templates[model]; ok {
		return t
	}
	free := map[*Device]bool{}
	for _, devs := range r.free {
		for _, d := range devs {
			free[d] = true
		}
	}
	var best *Device
	for _, d := range r.inv.devices {
		p, ok := r.byUUID[d.ParentUUID]
		if d.Type != slicebuilder.TypeMIG || !ok || p.Model != model || len(p.Taints) > 0 {
			continue
		}
		if best == nil || (free[p] && !free[best]) {
			best = p
		}
		if free[best] {
			break
		}
	}
	var t *spareedit.Template
	if best != nil {
		t = spareedit.ReadTemplate(r.sched.NodeSlices(best.Node), spareGPUOf(best))
	}
	f.templates[model] = t
	return t
}

// spareGPU is the free GPU of a node whose placements a spare would
// publish (slicebuilder picks free GPUs from the highest minor down): one
// that can partition and publishes none now; nil when there is none.
func (r *strandRun) spareGPU(node string) *Device {
	f := r.spareFit()
	if g, ok := f.spares[node]; ok {
		return g
	}
	g := r.findSpareGPU(node)
	f.spares[node] = g
	return g
}

func (r *strandRun) findSpareGPU(node string) *Device {
	f := r.spareFit()
	var best *Device
	bestMinor := -1
	for _, d := range r.free[node] {
		if !d.MigCapable || d.Architecture == "Ampere" || !r.inv.migSlots[d.ID.Pool] || f.published[d.UUID] || r.outOfService(d) {
			continue
		}
		if p, ok := gpu.ParseDeviceName(d.ID.Device); ok && !p.MIG && p.Minor > bestMinor {
			best, bestMinor = d, p.Minor
		}
	}
	return best
}

// spareGPUOf names a whole GPU for spareedit.
func spareGPUOf(d *Device) spareedit.GPU {
	return spareedit.GPU{Pool: d.ID.Pool, Device: d.ID.Device, UUID: d.UUID}
}

// wholeAttributes are the attributes of g's whole device, as its node
// publishes it.
func (r *strandRun) wholeAttributes(g *Device) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	for _, s := range r.sched.NodeSlices(g.Node) {
		if s.Spec.Pool.Name != g.ID.Pool {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == g.ID.Device {
				return s.Spec.Devices[i].Attributes
			}
		}
	}
	return nil
}

// helpedBySpare are the nodes of open (a pod that fits nowhere may go
// there, and they have a free GPU) where the pod's claims fit once the
// node publishes one more free GPU's placements, in open's order. Nodes
// alike (nodeclass.go) are asked about once, unless the pod's selectors
// read identities.
func (r *strandRun) helpedBySpare(ctx context.Context, rep pendingPod, open []string) ([]string, error) {
	f := r.spareFit()
	perNode := readsIdentities(rep, r.classes)
	answers := map[string]bool{}       // by node class
	usesPlacement := map[string]bool{} // by node class and model (mayUsePlacement)
	var out []string
	for _, name := range open {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g := r.spareGPU(name)
		if g == nil {
			continue
		}
		t := r.template(g.Model)
		if t == nil {
			// What a spare of this model publishes is unknown here.
			out = append(out, name)
			continue
		}
		if !perNode {
			// By class: nodes of one class publish the same attributes
			// but for identities, so their spares' placements carry the
			// same driver versions.
			key := r.classOf[name] + "\x00" + g.Model
			may, known := usesPlacement[key]
			if !known {
				may = r.mayUsePlacement(ctx, rep, t, r.wholeAttributes(g))
				usesPlacement[key] = may
			}
			if !may {
				continue // none of its requests can take a placement
			}
		}
		key := r.classOf[name]
		ok, known := answers[key]
		if !known || perNode {
			alloc, err := r.editedAllocator(ctx, name, g, t)
			if err != nil {
				return nil, err
			}
			_, ok = tryCopies(ctx, r.sched, alloc, f.nodes[name], rep, 1, r.out)
			answers[key] = ok
		}
		if ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// editedAllocator is the allocator over the node's slices with g's
// placements published as t lays them out (spareedit.WithSpare), kept for the next
// pods asked there.
func (r *strandRun) editedAllocator(ctx context.Context, node string, g *Device, t *spareedit.Template) (structured.Allocator, error) {
	f := r.spareFit()
	if a, ok := f.edited[node]; ok {
		return a, nil
	}
	a, err := r.sched.AllocatorEdited(ctx, r.state, node, func(local []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
		return spareedit.WithSpare(local, spareGPUOf(g), t)
	})
	if err != nil {
		return nil, err
	}
	if len(f.edited) < maxEditedAllocators {
		f.edited[node] = a
	}
	return a, nil
}

// mayUsePlacement says whether some request of the pod's unallocated
// claims (or one of its subrequests) may be given one of the placements t
// publishes: its class's and its own selectors match one of them, or
// cannot be evaluated on it (an error: the allocator decides). A pod none
// of whose requests can take a placement is helped by no spare (a spare
// only adds placements, and its whole GPU consumes their counters): no
// allocator need be asked. Only for selectors that read no identity (the
// placements are t's GPU's, not the spare's); the attributes they carry
// of their GPU are the spare's (parent: its whole device's).
func (r *strandRun) mayUsePlacement(ctx context.Context, rep pendingPod, t *spareedit.Template, parent map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) bool {
	migs := make([]resourceapi.Device, len(t.MIGs))
	for i, d := range t.MIGs {
		d.Attributes = spareedit.WithParent(d.Attributes, parent)
		migs[i] = d
	}
	cache := r.sched.CELCache()
	matches := func(sel []resourceapi.DeviceSelector, d *resourceapi.Device) bool {
		for _, s := range sel {
			if s.CEL == nil {
				continue
			}
			expr := cache.GetOrCompile(s.CEL.Expression)
			if expr.Error != nil {
				return true
			}
			ok, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: t.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
			if err != nil {
				return true
			}
			if !ok {
				return false
			}
		}
		return true
	}
	takes := func(className string, sel []resourceapi.DeviceSelector) bool {
		c, err := r.classes.Get(className)
		if err != nil {
			return true
		}
		for i := range migs {
			if matches(c.Spec.Selectors, &migs[i]) && matches(sel, &migs[i]) {
				return true
			}
		}
		return false
	}
	for _, c := range rep.claims {
		if c.Status.Allocation != nil {
			continue // shared and allocated: not allocated again
		}
		for _, req := range c.Spec.Devices.Requests {
			if req.Exactly != nil && takes(req.Exactly.DeviceClassName, req.Exactly.Selectors) {
				return true
			}
			for _, sub := range req.FirstAvailable {
				if takes(sub.DeviceClassName, sub.Selectors) {
					return true
				}
			}
		}
	}
	return false
}
