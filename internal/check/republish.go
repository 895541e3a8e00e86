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

package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/spareedit"
)

// A node's plugin republishes its slices after each prepare: on a node
// that publishes the MIG placements of its spare GPUs only, a claim that
// takes a partition of the spare makes the next free GPU a spare
// (docs/mig.md). Where claims see what earlier ones hold (--sequential,
// the pods of a gang), later claims see the node's slices as its plugin
// republished them (Options.Republish); the report's inventory stays the
// one given. Within a group of claims that hold their devices together
// (the replicas of a workload without --sequential) too.

// publisher owns what the nodes publish as claims are prepared on them
// (Options.Republish): per node, the claims prepared since its slices
// were first replaced (republished), whether the scheduler's view lags
// behind them (unpublished), and gpudra's device model of each pool read
// back from what its node publishes (nodes), for the prepare-time checks.
type publisher struct {
	ctx      context.Context
	opts     Options
	sched    *scheduler.Scheduler
	inv      *inventory
	findings *findingLog
	// republished is, per node, what it published since its slices were
	// replaced; unpublished is set while a node's prepared claims are not
	// in the scheduler's view yet.
	republished map[string]*republishedNode
	unpublished bool
	// nodes are gpudra's pools read back into the device model.
	nodes map[string]gpu.Node
}

// republishedNode is what one node published since its slices were first
// replaced.
type republishedNode struct {
	// given are the node's slices as the inventory holds them.
	given []*resourceapi.ResourceSlice
	// prepared are the allocations on the node, one per claim, in order.
	prepared [][]resourceapi.DeviceRequestAllocationResult
	// published counts the claims of prepared that the scheduler's view
	// of the node includes: the node is republished (flush) only
	// when a later claim is about to look at it, so that a pod alone in
	// its group, whose claims no later one sees, costs no republish.
	published int
}

// republish replaces the node's slices with what it publishes once the
// claim allocated there (res) is prepared, beside those before it.
func (pb *publisher) republish(node string, res *resourceapi.AllocationResult) {
	if pb.opts.Republish == nil || node == "" {
		return
	}
	if pb.republished == nil {
		pb.republished = map[string]*republishedNode{}
	}
	rn, ok := pb.republished[node]
	if !ok {
		rn = &republishedNode{given: pb.sched.NodeSlices(node)}
		pb.republished[node] = rn
	}
	rn.prepared = append(rn.prepared, slices.Clone(res.Devices.Results))
	pb.unpublished = true
}

// flush republishes every node whose prepared claims the
// scheduler's view does not include yet. Whatever reads the nodes' slices
// or their device model (allocation, prepare-time checks, the spares
// statement) calls it first.
func (pb *publisher) flush() {
	if !pb.unpublished {
		return
	}
	pb.unpublished = false
	for _, node := range slices.Sorted(maps.Keys(pb.republished)) {
		if rn := pb.republished[node]; rn.published != len(rn.prepared) {
			pb.publishNode(node, rn)
		}
	}
}

// publishNode hands the scheduler what the node publishes once the claims
// in rn.prepared are, and the prepare-time checks the node read back from
// it.
func (pb *publisher) publishNode(node string, rn *republishedNode) {
	rn.published = len(rn.prepared)
	out := rn.given
	if len(rn.prepared) > 0 {
		var err error
		out, err = pb.opts.Republish(pb.ctx, node, rn.prepared)
		if err != nil {
			pb.findings.add(Finding{Kind: FindingUnsatisfiable, Severity: SeverityNote, Object: "node " + node,
				Message: fmt.Sprintf("what node %s publishes once its claims are prepared is not known (%v): later claims see its slices as they were", node, err)})
			return
		}
	}
	pb.sched.ReplaceNodeSlices(node, out)
	byPool := map[string][]resourceapi.Device{}
	for _, s := range out {
		if s.Spec.Driver == pb.opts.DriverName {
			byPool[s.Spec.Pool.Name] = append(byPool[s.Spec.Pool.Name], s.Spec.Devices...)
		}
	}
	for pool, devs := range byPool {
		if len(rn.prepared) == 0 {
			delete(pb.nodes, pool) // read back from the inventory again
		} else {
			pb.nodes[pool] = slicebuilder.NodeOf(pool, devs)
		}
	}
}

// save is what the nodes published, for restore.
func (pb *publisher) save() map[string][][]resourceapi.DeviceRequestAllocationResult {
	out := map[string][][]resourceapi.DeviceRequestAllocationResult{}
	for node, rn := range pb.republished {
		out[node] = slices.Clone(rn.prepared)
	}
	return out
}

// restore makes every node publish what it published when
// save returned saved (nil: the slices as given), by the time
// anything looks at it.
func (pb *publisher) restore(saved map[string][][]resourceapi.DeviceRequestAllocationResult) {
	for _, node := range slices.Sorted(maps.Keys(pb.republished)) {
		// Claims are only appended between a save and its restore, so
		// the scheduler's view holds a prefix of saved unless it holds
		// more than saved: then the node publishes again when next looked
		// at (flush).
		rn := pb.republished[node]
		rn.prepared = saved[node]
		if rn.published > len(rn.prepared) {
			rn.published = -1
		}
		pb.unpublished = pb.unpublished || rn.published != len(rn.prepared)
	}
}

// EditRefill sets opts.Republish to model the MIG spare
// refill on slices that no profile describes (the input files' and
// opts.Slices: `gpudra inventory` output, a live cluster's) by editing
// what the nodes publish (spareedit.Republisher): a partition taken from
// a spare makes the next free partitionable GPU publish the placements
// of a GPU of the same model that publishes them. The slices are edited
// as the API server of opts.KubernetesVersion stores them; where that
// version serves no partitionable devices the plugin publishes whole
// GPUs only, so nothing refills and the options stay as they are.
func EditRefill(opts *Options) error {
	version := opts.KubernetesVersion
	if version == "" {
		version = scheduler.DefaultKubernetesVersion
	}
	feats, err := scheduler.FeaturesFor(version)
	if err != nil {
		return err
	}
	if !feats.Allocator.PartitionableDevices {
		return nil
	}
	var all []*resourceapi.ResourceSlice
	all = append(all, opts.Slices...)
	if opts.Inputs != nil {
		for _, o := range opts.Inputs.Slices {
			all = append(all, o.Obj.(*resourceapi.ResourceSlice))
		}
	}
	// As loadInventory reads them.
	if !feats.Allocator.ConsumableCapacity || !feats.Allocator.DeviceTaints || !feats.Allocator.DeviceBindingAndStatus {
		for i, s := range all {
			c := s.DeepCopy()
			if scheduler.DropDisabledFields(c, feats) {
				all[i] = c
			}
		}
	}
	var held []resourceapi.DeviceRequestAllocationResult
	for _, c := range opts.Held {
		if c.Status.Allocation != nil {
			held = append(held, c.Status.Allocation.Devices.Results...)
		}
	}
	driver := opts.DriverName
	if driver == "" {
		driver = gpu.DefaultDriverName
	}
	rp := spareedit.NewRepublisher(driver, all, held)
	// Not opts.Spare: whether gpudra-controller gives these nodes spares
	// (fleet mode) is not in their slices, and taking a claim that fits
	// only with one more as waiting would pass it on a pool that keeps a
	// fixed number; the report says so (sparesAssumed).
	opts.Republish, opts.RefillEdited = rp.Slices, true
	return nil
}

// maxSpareTries bounds the nodes that waitsForSpare gives a spare for one
// pod: each try builds a node's slices, and nodes alike answer alike.
const maxSpareTries = 8

// waitsForSpare says whether the pod's claims, which fit on no node as
// the nodes publish now, fit on a node once gpudra-controller gives it a
// spare (Options.Spare), and reports them so: in fleet mode a partition
// claim waits for the controller's spare rather than being refused. A
// gang's pods are not asked here: gangFitsWithFleetSpares gives a gang
// its spares as the controller does, all at once.
func (r *runner) waitsForSpare(pod *v1.Pod, claims []*resourceapi.ResourceClaim, todo []*claimEval) bool {
	if r.opts.Spare == nil || r.inGang {
		return false
	}
	r.pub.flush()
	node, given, place := r.spareNodeFor(pod, claims, nil)
	if place == nil {
		return false
	}
	// Only asked: the spare is the controller's to give.
	r.sched.ReplaceNodeSlices(node, given)
	msg := fmt.Sprintf("no node publishes what it needs now, and node %s would once gpudra-controller gives it a MIG spare (the plugin's --mig-spare-gpus=fleet, chart migSpareGPUs: fleet): the pod is Pending until the controller does, a recompute and a republish later (docs/mig.md, Spares across the fleet)", node)
	for _, ce := range todo {
		r.unsatisfiable(ce, msg)
		r.findings.add(Finding{Kind: FindingWaitsForSpare, Severity: SeverityWarning, Source: ce.source, Object: ce.object, Field: ce.field + ".devices",
			Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg),
			Hint:    "to have a spare there beforehand, set the plugin's --mig-spare-gpus (chart migSpareGPUs) to a number on that node pool, or raise gpudra-controller's --mig-spare-nodes"})
	}
	return true
}

// spareNodeFor finds, as gpudra-controller would, a node that the pod's
// claims (which fit nowhere as the nodes publish now) fit on once it is
// given a MIG spare (Options.Spare): among the nodes the pod and the fence
// admit and skip does not name, the first of at most maxSpareTries that
// would publish one. It leaves that node publishing the spare and returns
// it, its slices before, and the placement there; place is nil when no
// node fits, and then nothing is changed.
func (r *runner) spareNodeFor(pod *v1.Pod, claims []*resourceapi.ResourceClaim, skip func(node string) bool) (node string, before []*resourceapi.ResourceSlice, place *scheduler.Placement) {
	tries := 0
	for _, n := range r.sched.Nodes() {
		if skip != nil && skip(n.Name) {
			continue
		}
		if pod != nil {
			if ok, _ := scheduler.PodFitsNode(pod, n); !ok {
				continue
			}
		}
		if r.fence != nil && !r.fence(n) {
			continue
		}
		var prepared [][]resourceapi.DeviceRequestAllocationResult
		if rn := r.pub.republished[n.Name]; rn != nil {
			prepared = rn.prepared
		}
		spared, err := r.opts.Spare(r.ctx, n.Name, prepared)
		if err != nil || spared == nil {
			continue // the node keeps a spare already, or what it would publish is not known
		}
		if tries++; tries > maxSpareTries {
			return "", nil, nil
		}
		given := r.sched.NodeSlices(n.Name)
		r.sched.ReplaceNodeSlices(n.Name, spared)
		place, err := r.sched.Schedule(r.ctx, r.state, claims, func(c *v1.Node) bool { return c.Name == n.Name })
		if err != nil || place == nil || place.Node == nil {
			r.sched.ReplaceNodeSlices(n.Name, given)
			continue
		}
		return n.Name, given, place
	}
	return "", nil, nil
}

// gangFitsWithRefill says whether the gang, which does not fit on what
// the nodes publish now, would fit if each prepare refilled the spares
// before the next pod is placed, as a lone pod's does; before is the
// attempt saved before the gang was first tried. Everything the try
// changes is put back.
func (r *runner) gangFitsWithRefill(g *gangInfo, members []*unit, before *attempt) bool {
	if r.opts.Republish == nil {
		return false
	}
	after, findings := r.saveAttempt(members), slices.Clone(r.report.Findings)
	state, held, published := r.state.Clone(), slices.Clone(r.prep.held), r.pub.save()
	r.restoreAttempt(before)
	r.gangRefill = true
	placed := r.tryGang(g, members)
	r.gangRefill = false
	r.state, r.prep.held = state, held
	r.pub.restore(published)
	r.restoreAttempt(after)
	r.report.Findings = findings
	return placed == len(members) && placed >= g.minCount
}

// gangWaitsForSpares reports a gang that fits only on the MIG placements
// nodes publish after a prepare: it binds whole, before any, so it waits.
func (r *runner) gangWaitsForSpares(g *gangInfo, members []*unit, placed int) {
	r.gangWaitsAs(g, members, Finding{Kind: FindingWaitsForSpare,
		Message: fmt.Sprintf("PodGroup %s is a gang of at least %d pods: %d of its %d pods fit on the MIG placements the nodes publish now, the rest only on those a node publishes after a prepare (a partition taken from a spare makes the next free GPU a spare); a gang binds whole, before any of it is prepared, so none is placed: it waits until the nodes it may use publish the spares it needs",
			g.obj.Name, g.minCount, placed, len(members)),
		Hint: "keep as many spares as the gang's partitions need on its nodes: the plugin's --mig-spare-gpus (chart migSpareGPUs) set to that number on the node pool; with fleet, it waits for spares gpudra-controller gives (docs/mig.md, Spares across the fleet)"})
}

// dropPartitions removes the driver's MIG placements from a slice, as
// the plugin publishes on a cluster that does not serve partitionable
// devices (whole GPUs only, slicebuilder.Options.WholeGPUsOnly): slices
// read from files or a cluster of a newer version would otherwise offer
// partitions without the counters that keep them apart. It returns how
// many it removed.
func dropPartitions(s *resourceapi.ResourceSlice, driver string) int {
	if s.Spec.Driver != driver {
		return 0
	}
	kept := s.Spec.Devices[:0]
	for _, d := range s.Spec.Devices {
		if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG {
			continue
		}
		kept = append(kept, d)
	}
	n := len(s.Spec.Devices) - len(kept)
	s.Spec.Devices = kept
	return n
}

// sparesAssumed is the report's statement of what check assumes about
// MIG spares: how many nodes publish a free GPU's placements, what the
// plugin's --mig-spare-gpus is, and whether a prepare refills them.
func (r *runner) sparesAssumed() string {
	if !r.feats.Allocator.PartitionableDevices {
		return fmt.Sprintf("none: Kubernetes %s does not serve partitionable devices, so gpudra's plugin publishes whole GPUs only, no MIG placements", r.feats.Version)
	}
	r.pub.flush()
	capable, publishing := map[string]bool{}, map[string]bool{}
	for _, s := range r.sched.Slices() {
		if s.Spec.Driver != r.opts.DriverName || s.Spec.NodeName == nil {
			continue
		}
		for _, d := range s.Spec.Devices {
			// As gpudra-controller reads it (internal/fleet): an Ampere
			// GPU switches MIG mode only with a reset, so the plugin
			// never makes one a spare.
			if a, ok := d.Attributes[slicebuilder.AttrMigCapable]; ok && a.BoolValue != nil && *a.BoolValue && !isAmpere(d) {
				capable[*s.Spec.NodeName] = true
			}
			if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG {
				publishing[*s.Spec.NodeName] = true
			}
		}
	}
	r.migCapable, r.migPublishing = len(capable), len(publishing)
	if len(capable) == 0 {
		return "none: no node of the inventory has a GPU that can take a MIG spare (Hopper or later)"
	}
	parts := []string{fmt.Sprintf("%d of the %d node(s) with a GPU that can take a MIG spare publish MIG placements", len(publishing), len(capable))}
	switch r.opts.SpareGPUs {
	case "":
		parts = append(parts, "as the inventory holds them (check does not know the plugin's --mig-spare-gpus there)")
	case "fleet":
		parts = append(parts, fmt.Sprintf("--mig-spare-gpus=fleet: gpudra-controller keeps a spare on %d node(s), its budget for a pool that has run no partitions yet (--mig-spare-nodes, 5%% and at least 2 by default; a pool whose recent claims are partitions keeps one on every node), and gives one to a node where a waiting pod needs it; a claim that fits only so waits for it (waits-for-spare)", r.opts.SpareNodes))
	default:
		parts = append(parts, fmt.Sprintf("--mig-spare-gpus=%s on every node", r.opts.SpareGPUs))
	}
	switch {
	case r.opts.Republish != nil && r.opts.RefillEdited:
		parts = append(parts, "a partition taken from a spare makes the next free GPU a spare once prepared, modelled by editing the published slices (each node keeps as many spares as it publishes now, and a new spare publishes the placements of a GPU of its model that publishes them; a model none publishes is not refilled), which later claims see with --sequential and among a workload's replicas; a gang sees only what is published before it binds")
		if r.opts.Spare == nil {
			parts = append(parts, "check does not know whether gpudra-controller gives these nodes spares (--mig-spare-gpus=fleet, the chart's default), so a claim that fits only once a node is given one more is reported as not fitting, where with fleet it would wait for the controller")
		}
	case r.opts.Republish != nil:
		parts = append(parts, "a partition taken from a spare makes the next free GPU a spare once prepared, which later claims see with --sequential and among a workload's replicas; a gang sees only what is published before it binds")
	default:
		parts = append(parts, "what a node publishes after a prepare is not modelled: later claims see its slices as given")
	}
	return strings.Join(parts, "; ")
}

// isAmpere says whether a device is of an Ampere GPU.
func isAmpere(d resourceapi.Device) bool {
	a, ok := d.Attributes[slicebuilder.AttrArchitecture]
	return ok && a.StringValue != nil && *a.StringValue == "Ampere"
}
