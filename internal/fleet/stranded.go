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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Stranded GPUs are free whole GPUs that no pending pod can use: eight free
// GPUs scattered over NVLink islands while an eight-GPU same-island claim
// waits; a node's third free GPU while every waiting pod needs two. They
// are the GPUs that stay free however many of the waiting pods are placed. They are
// what the fleet pays for and cannot schedule. A GPU is only stranded while
// something waits: a free GPU with no demand is idle capacity, not
// stranded.
//
// What "can use" means is what the scheduler would do, computed with the
// offline scheduler core (internal/scheduler) and the real allocator, the same
// code `gpudra check` runs:
//
//  1. Pending pods are the pods not yet bound to a node whose claims for
//     this driver are unallocated, and the pods whose extended resources
//     (nvidia.com/gpu: 1) map to this driver's DeviceClasses. Pods with the
//     same claims ask for the same thing: they are checked once, as one
//     shape.
//  2. For each shape and each schedulable node with free GPUs, the
//     allocator places as many copies of the pod's claims as fit together
//     on the node (found by trying the most copies the node's free GPUs
//     could hold, then halving), against what is allocated. Every GPU the
//     largest fit uses, whole or through a MIG partition, is usable. A
//     shape that fits on no node counts its pods as unsatisfiable.
//  3. Every other free, untainted GPU of a schedulable node is stranded.
//     A GPU a DeviceTaintRule taints NoSchedule or NoExecute (when the
//     cluster applies the rules) is not: the allocator gives it to a
//     claim that tolerates the taint, so it stays a candidate, but the
//     rule took it out of service on purpose, as the plugin's own taint
//     does (a GPU tainted in its slice is not free at all); a pod kept
//     off it is not what strands it.
//
// A node counts for a pod only where the scheduler's other filters admit
// the pod (scheduler.PodFitsNode: its node selector, required node
// affinity, the node's taints and its tolerations, cordons): a free GPU on
// a node no waiting pod may go to is stranded. A gang (the pods of a
// PodGroup with a gang policy) is one workload: its waiting pods are
// placed together, one after the other, each seeing what the earlier ones
// took (and their shared PodGroup claim allocated once); the GPUs they
// would take are usable if all of them fit, and none are if one does not.
// A gang that cannot be placed whole is one unsatisfiable workload, and
// the free GPUs its pods could each have used alone are stranded.
//
// Nodes without free GPUs are skipped, and so are nodes whose free GPUs
// are all usable already once the shape is known to fit somewhere. Nodes
// alike (nodeclass.go) are asked about once.

// Stranding is the result of one computation.
type Stranding struct {
	// Stranded counts stranded GPUs by node and model.
	Stranded map[GPUKey]int
	// PendingPods are the pods waiting for this driver's devices;
	// Unsatisfiable those whose claims fit on no node now (every waiting
	// pod of a gang that cannot be placed whole).
	PendingPods, Unsatisfiable int
	// Workloads are what waits, a lone pod or a gang counting once;
	// UnsatisfiableWorkloads those that cannot be placed now.
	Workloads, UnsatisfiableWorkloads int
	// Shapes are the distinct pending pods checked; Filters the allocator
	// calls it took.
	Shapes, Filters int
	// Unplaced are the shapes of lone pods that fit on no node now, and
	// every pod of a gang that cannot be placed whole now, with the
	// nodes each may go to that have a free GPU: where a MIG spare
	// could let it in (gpudra-controller's spares across the fleet,
	// package migspares).
	Unplaced []Unplaced
}

// Unplaced is one shape of waiting pods that fits on no node now.
type Unplaced struct {
	// Pod names one of its pods ("namespace/name"), so that what is done
	// for it can be remembered from one recompute to the next.
	Pod string
	// Nodes are the nodes it may go to (its node filters and allocated
	// claims allow them) where the allocator says it would fit once the
	// node publishes one more free GPU's MIG placements (sparefit.go), in
	// the scheduler's order: none for a pod no spare can help.
	Nodes []string
	// Gang is the pod's PodGroup ("namespace/name") when it is one of a
	// gang's pods; "" for a lone pod.
	Gang string
}

// pendingPod is one waiting pod: all its claims (those allocated already,
// shared with a running pod, restrict it to their nodes), and the key of
// its shape.
type pendingPod struct {
	pod    string
	obj    *corev1.Pod
	claims []*resourceapi.ResourceClaim
	shape  string
	// gang is the pod's PodGroup ("namespace/name") when the group is a
	// gang; "" for a pod scheduled on its own.
	gang string
	// nodes restricts the pod to the nodes its allocated claims are
	// available on.
	nodes []*nodeaffinity.NodeSelector
}

// fitsNode reports whether the pod's allocated claims and the
// scheduler's node filters allow the node.
func (p pendingPod) fitsNode(node *corev1.Node) bool {
	for _, s := range p.nodes {
		if !s.Match(node) {
			return false
		}
	}
	ok, _ := scheduler.PodFitsNode(p.obj, node)
	return ok
}

// Strander computes stranded GPUs, keeping what it can reuse between
// recomputes (the fingerprints of unchanged slices).
type Strander struct {
	cache     sliceCache
	compactor Compactor
}

// Strand computes the stranded GPUs of in, afresh.
func Strand(ctx context.Context, in Inputs) (Stranding, error) {
	return (&Strander{}).Strand(ctx, in)
}

// Recompute is the whole fleet accounting: Account, and the stranded GPUs.
// A Stranding error leaves the rest of the snapshot valid.
func (st *Strander) Recompute(ctx context.Context, in Inputs) (Snapshot, error) {
	st.cache.driver = in.DriverName
	defer st.cache.forget()
	sl := in.compactSlices(&st.compactor)
	inv := newInventory(&st.cache, sl, in.Nodes, in.PoolLabels)
	alloc := allocatedDevices(in.DriverName, in.Claims)
	snap := account(in, inv, alloc)
	var err error
	snap.Stranding, err = st.strand(ctx, in, sl, inv, alloc)
	return snap, err
}

// Strand computes the stranded GPUs of in. ctx bounds the time it takes.
func (st *Strander) Strand(ctx context.Context, in Inputs) (Stranding, error) {
	st.cache.driver = in.DriverName
	defer st.cache.forget()
	sl := in.compactSlices(&st.compactor)
	return st.strand(ctx, in, sl, newInventory(&st.cache, sl, in.Nodes, in.PoolLabels), allocatedDevices(in.DriverName, in.Claims))
}

// strand computes the stranded GPUs in the steps the package doc lists:
// the pending pods, the free GPUs, which of them each lone pod's shape and
// each gang would use, and what is left.
func (st *Strander) strand(ctx context.Context, in Inputs, sl []*CompactSlice, inv inventory, alloc map[DeviceID]bool) (Stranding, error) {
	sched, classes := strandScheduler(in, sl)
	pods := pendingPods(in, sched)
	out := Stranding{Stranded: map[GPUKey]int{}, PendingPods: len(pods)}
	if len(pods) == 0 {
		// A free GPU nothing waits for is idle capacity, not stranded.
		return out, nil
	}
	lone, gangs, gangOrder := splitGangs(pods)
	shapes, shapeOrder := groupShapes(lone)
	out.Workloads = len(lone) + len(gangOrder)
	out.Shapes = len(shapeOrder)

	free, byUUID := freeGPUs(inv, alloc)
	r := &strandRun{
		sched: sched, classes: classes, inv: inv, state: scheduler.StateOf(in.Claims),
		free: free, byUUID: byUUID,
		classOf: nodeClasses(nodeNames(sched), sl, allocatedByNode(sl, in.Claims)),
		usable:  map[*Device]bool{}, out: &out,
		outOfService: ruleTainted(in),
	}
	for _, key := range shapeOrder {
		fits, open, err := r.useShape(ctx, shapes[key][0])
		if err != nil {
			return out, err
		}
		if !fits {
			// Only where a spare lets it in (sparefit.go).
			helped, err := r.helpedBySpare(ctx, shapes[key][0], open)
			if err != nil {
				return out, err
			}
			out.Unplaced = append(out.Unplaced, Unplaced{Pod: shapes[key][0].pod, Nodes: helped})
			// Every pod of a shape that fits nowhere waits on its own.
			out.Unsatisfiable += len(shapes[key])
			out.UnsatisfiableWorkloads += len(shapes[key])
		}
	}
	for _, g := range gangOrder {
		fits, err := r.useGang(ctx, gangs[g])
		if err != nil {
			return out, err
		}
		if !fits {
			// A gang is one workload, however many pods wait in it.
			out.Unsatisfiable += len(gangs[g])
			out.UnsatisfiableWorkloads++
			// It binds whole, and the next GPU's placements appear only
			// after a prepare: each of its pods is listed where a spare
			// lets it in, so that the policy gives the gang as many
			// spares as it has pods, once, as it does a lone pod.
			for _, m := range gangs[g] {
				helped, err := r.helpedBySpare(ctx, m, r.openNodes(m))
				if err != nil {
					return out, err
				}
				out.Unplaced = append(out.Unplaced, Unplaced{Pod: m.pod, Nodes: helped, Gang: g})
			}
		}
	}
	r.countStranded()
	return out, nil
}

// strandScheduler is the offline scheduler over the slices. The allocator
// gets the slices of one node at a time, rebuilt from their compact form
// (compact.go) when it is asked about that node: the fleet's slices are
// never all rebuilt at once.
func strandScheduler(in Inputs, sl []*CompactSlice) (*scheduler.Scheduler, *scheduler.Classes) {
	features := in.Features
	if features.Version == "" {
		features = scheduler.DefaultFeatures()
	}
	classes := scheduler.NewClasses(in.Classes)
	nodes := newNodeSlices(sl)
	sched := scheduler.NewOver(features, classes, nodes.names, nodes.full, in.TaintRules)
	sched.UseNodes(in.Nodes)
	return sched, classes
}

// nodeNames are the scheduler's nodes, in its order.
func nodeNames(sched *scheduler.Scheduler) []string {
	var names []string
	for _, n := range sched.Nodes() {
		names = append(names, n.Name)
	}
	return names
}

// groupShapes groups the lone pods by shape, in the order each shape is
// first met: pods that ask for the same thing are asked about once.
func groupShapes(lone []pendingPod) (map[string][]pendingPod, []string) {
	shapes := map[string][]pendingPod{}
	var order []string
	for _, p := range lone {
		if _, seen := shapes[p.shape]; !seen {
			order = append(order, p.shape)
		}
		shapes[p.shape] = append(shapes[p.shape], p)
	}
	return shapes, order
}

// freeGPUs returns the free GPUs by node, and every whole GPU by UUID (a
// MIG partition's use is its parent's). Free is what a waiting pod could
// be given now: a whole GPU nothing is allocated from, neither itself nor
// a partition of it, with no taint, on a node that is not cordoned. Only
// free GPUs can be stranded.
func freeGPUs(inv inventory, alloc map[DeviceID]bool) (free map[string][]*Device, byUUID map[string]*Device) {
	partitioned := map[string]bool{}
	for _, d := range inv.devices {
		if d.Type == slicebuilder.TypeMIG && alloc[d.ID] {
			partitioned[d.ParentUUID] = true
		}
	}
	free, byUUID = map[string][]*Device{}, map[string]*Device{}
	for _, d := range inv.devices {
		if d.Type != slicebuilder.TypeGPU {
			continue
		}
		byUUID[d.UUID] = d
		if alloc[d.ID] || partitioned[d.UUID] || len(d.Taints) > 0 {
			continue
		}
		if ok, known := inv.schedulable[d.Node]; known && !ok {
			continue
		}
		free[d.Node] = append(free[d.Node], d)
	}
	return free, byUUID
}

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

// nodeSlices are the slices by node, for the allocator.
type nodeSlices struct {
	// names are the nodes the slices name.
	names []string
	// byNode are the slices on each node; shared those on no one node
	// (all nodes, a node selector, per-device node selection).
	byNode map[string][]*CompactSlice
	shared []*CompactSlice
	// sharedFull are the shared slices rebuilt, once.
	sharedFull []*resourceapi.ResourceSlice
}

func newNodeSlices(sl []*CompactSlice) *nodeSlices {
	ns := &nodeSlices{byNode: map[string][]*CompactSlice{}}
	for _, s := range sl {
		if s.NodeName != "" {
			ns.byNode[s.NodeName] = append(ns.byNode[s.NodeName], s)
			ns.names = append(ns.names, s.NodeName)
			continue
		}
		ns.shared = append(ns.shared, s)
		ns.names = append(ns.names, s.shape.nodeNames...)
	}
	return ns
}

// full returns the slices the allocator reads on a node, rebuilt.
func (ns *nodeSlices) full(node string) []*resourceapi.ResourceSlice {
	if ns.sharedFull == nil && len(ns.shared) > 0 {
		for _, s := range ns.shared {
			ns.sharedFull = append(ns.sharedFull, s.Full())
		}
	}
	out := slices.Clone(ns.sharedFull)
	for _, s := range ns.byNode[node] {
		out = append(out, s.Full())
	}
	return out
}

// allocatedByNode lists, per node, the devices (driver/name) claims hold in
// the node's pools; admin access holds nothing.
func allocatedByNode(sl []*CompactSlice, claims []*resourceapi.ResourceClaim) map[string][]string {
	nodeOf := map[string]string{} // driver/pool → node
	for _, s := range sl {
		if s.NodeName != "" {
			nodeOf[s.Driver+"/"+s.Pool.Name] = s.NodeName
		}
	}
	out := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			if n, ok := nodeOf[r.Driver+"/"+r.Pool]; ok {
				out[n] = append(out[n], r.Driver+"/"+r.Device)
			}
		}
	}
	return out
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

// pendingPods are the pods waiting for this driver's devices, each with
// the claims the scheduler would allocate together.
func pendingPods(in Inputs, sched *scheduler.Scheduler) []pendingPod {
	ours := driverClasses(in.DriverName, in.Classes)
	claims := map[string]*resourceapi.ResourceClaim{}
	for _, c := range in.Claims {
		claims[c.Namespace+"/"+c.Name] = c
	}
	gangs, groupClaims := podGroups(in.PodGroups)
	var out []pendingPod
	for _, pod := range in.Pods {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		generated := map[string]string{}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				generated[s.Name] = *s.ResourceClaimName
			}
		}
		var podClaims []*resourceapi.ResourceClaim
		waits, complete := false, true
		for _, rc := range pod.Spec.ResourceClaims {
			name := generated[rc.Name]
			if rc.ResourceClaimName != nil {
				name = *rc.ResourceClaimName
			}
			if n := groupClaims[scheduler.GangOf(pod)+"/"+rc.Name]; n != "" && rc.ResourceClaimName == nil {
				name = n // the claim made for the pod's PodGroup
			}
			c, ok := claims[pod.Namespace+"/"+name]
			if name == "" || !ok {
				complete = false // the claim is not created yet
				continue
			}
			podClaims = append(podClaims, c)
			if c.Status.Allocation == nil && requestsClass(c, ours) {
				waits = true
			}
		}
		if pod.Status.ExtendedResourceClaimStatus == nil {
			p := pod.DeepCopy()
			scheduler.DefaultPod(p)
			if ext := sched.ExtendedResources(p); ext.Claim != nil && requestsClass(ext.Claim, ours) {
				podClaims = append(podClaims, ext.Claim)
				waits = true
			}
		}
		if !waits || !complete {
			continue
		}
		p := pendingPod{pod: pod.Namespace + "/" + pod.Name, obj: pod, claims: podClaims,
			shape: shapeOf(podClaims) + scheduler.NodeConstraintsKey(pod)}
		if g := scheduler.GangOf(pod); gangs[g] > 0 {
			p.gang = g
		}
		for _, c := range podClaims {
			if c.Status.Allocation != nil && c.Status.Allocation.NodeSelector != nil {
				if sel, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector); err == nil {
					p.nodes = append(p.nodes, sel)
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// shapeOf keys what a pod asks for: the specs of its unallocated claims and
// the allocations of the others.
func shapeOf(claims []*resourceapi.ResourceClaim) string {
	type part struct {
		Spec       *resourceapi.ResourceClaimSpec `json:"spec,omitempty"`
		Allocation *resourceapi.AllocationResult  `json:"allocation,omitempty"`
	}
	parts := make([]part, len(claims))
	for i, c := range claims {
		if c.Status.Allocation != nil {
			parts[i].Allocation = c.Status.Allocation
		} else {
			parts[i].Spec = &c.Spec
		}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		panic(fmt.Sprintf("marshal claim specs: %v", err)) // API types always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// podGroups reads the PodGroups: the minCount of each gang
// ("namespace/name"), and the claims made for PodGroups, by
// "namespace/group/claim" (the name pods and the group use for it).
func podGroups(groups []*schedulingv1beta1.PodGroup) (map[string]int, map[string]string) {
	gangs, claims := map[string]int{}, map[string]string{}
	for _, g := range groups {
		key := g.Namespace + "/" + g.Name
		if gang := g.Spec.SchedulingPolicy.Gang; gang != nil {
			gangs[key] = max(int(gang.MinCount), 1)
		}
		for _, st := range g.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				claims[key+"/"+st.Name] = *st.ResourceClaimName
			}
		}
	}
	return gangs, claims
}

// splitGangs separates the pods that wait on their own from the gangs'
// waiting pods (by gang, in the order first seen).
func splitGangs(pods []pendingPod) (lone []pendingPod, gangs map[string][]pendingPod, order []string) {
	gangs = map[string][]pendingPod{}
	for _, p := range pods {
		if p.gang == "" {
			lone = append(lone, p)
			continue
		}
		if _, seen := gangs[p.gang]; !seen {
			order = append(order, p.gang)
		}
		gangs[p.gang] = append(gangs[p.gang], p)
	}
	return lone, gangs, order
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
