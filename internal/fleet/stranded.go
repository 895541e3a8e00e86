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
	"slices"

	resourceapi "k8s.io/api/resource/v1"

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
//
// This file holds the computation's outline; pending.go finds the waiting
// pods and their shapes (step 1), usable.go which free GPUs each shape or
// gang would use (step 2).

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
