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
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// Options configure Run.
type Options struct {
	// Inputs are the decoded manifests (scheduler.LoadPaths, LoadFS).
	Inputs *scheduler.Manifests
	// Slices are inventory besides the ResourceSlices among the inputs,
	// e.g. what gpudra publishes on fake nodes (internal/fakenodes);
	// SlicesSource says where they come from, for the report.
	Slices       []*resourceapi.ResourceSlice
	SlicesSource string
	// SlicesNotes say how the caller's slices differ from what the
	// newest Kubernetes would hold (fakenodes.Pool.On), for the report.
	SlicesNotes []string
	// DriverName is the driver gpudra runs as (default gpu.gpudra.io):
	// the built-in DeviceClasses are rendered for it, and opaque configs
	// for it are validated as the plugin validates them.
	DriverName string
	// KubernetesVersion selects the feature set (scheduler.KubernetesVersions).
	KubernetesVersion string
	// Sequential allocates claims one after the other, each seeing what
	// the earlier ones hold; otherwise each is allocated on an empty
	// inventory.
	Sequential bool
	// Republish, when set, is what a node publishes once the claims
	// allocated on it so far are prepared (prepared: one entry per claim,
	// in the order they were allocated, each the devices it holds): in
	// sequential mode, within a gang and among a workload's replicas, the
	// node's slices are replaced by it after each allocation, as gpudra's
	// plugin republishes after each prepare (a MIG partition taken from a node's spare GPU makes
	// the next GPU a spare; docs/mig.md). internal/fakenodes.Republisher
	// provides it for fake nodes, EditRefill for slices from files or a
	// cluster; nil keeps every node's slices as given.
	Republish func(ctx context.Context, node string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error)
	// Spare, when set, is what a node that keeps no MIG spare publishes
	// once gpudra-controller gives it one (--mig-spare-gpus=fleet), with
	// the claims in prepared prepared; nil slices for a node that keeps
	// one already. A claim that fits only so is Pending until the
	// controller gives the spare, not unsatisfiable (republish.go).
	// internal/fakenodes.Republisher.SparedSlices provides it; for slices
	// from files or a cluster whether the controller gives spares is not
	// known, and EditRefill leaves it unset.
	Spare func(ctx context.Context, node string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error)
	// RefillEdited says that Republish edits the given slices
	// (internal/spareedit, EditRefill) rather than run the slice builder
	// on fake nodes: for the report's statement of what check assumes
	// about spares.
	RefillEdited bool
	// SpareGPUs is the plugin's --mig-spare-gpus on the inventory's
	// nodes as the caller knows it ("" when it does not, as for slices
	// from files or a cluster), and SpareNodes, in fleet mode, how many
	// nodes gpudra-controller keeps a spare on: for the report's
	// statement of what check assumes about spares.
	SpareGPUs  string
	SpareNodes int
	// BuiltinClasses makes gpudra's shipped DeviceClasses known, as the
	// Helm chart installs them: a claim may use them without defining
	// them, and an input class of the same name is compared with them.
	BuiltinClasses bool
	// ListLimit: matching devices are listed by name when at most this
	// many (default 64); otherwise only counted.
	ListLimit int
	// AllocateTimeout bounds one allocator call on one node, as the
	// scheduler's DRASchedulerFilterTimeout does (default 10s).
	AllocateTimeout time.Duration
	// Strict makes warnings count for the exit status, as errors do.
	Strict bool
	// MPSDisabled: the plugin runs no MPS daemons (the chart's
	// mps.enabled: false), so a claim that asks for MPS fails to prepare.
	MPSDisabled bool
	// ShareSharing is how a claim holding a share of a GPU (consumable
	// capacity) shares it when its config does not say, the chart's
	// consumableCapacity.sharing: "MPS" (the default, as the plugin's),
	// "TimeSlicing" or "None".
	ShareSharing string
	// ClusterClasses are a live cluster's DeviceClasses (gpudra check
	// --cluster): known as the built-in ones are, replaced by an input
	// class of the same name (as applying it would), not checked
	// themselves.
	ClusterClasses []*resourceapi.DeviceClass
	// Held are claims allocated in a live cluster (gpudra check
	// --cluster): their devices are taken before any input claim is
	// allocated, so check says what fits right now.
	Held []*resourceapi.ResourceClaim
	// Progress, if set, is told how far a run got, after each item of
	// its long stages: stage says what is counted ("pods evaluated", "pods
	// placed"), done of total.
	Progress func(stage string, done, total int)
}

// Exit statuses.
const (
	ExitClean    = 0
	ExitFindings = 1
	ExitInput    = 2
)

// runner drives one check (Run) and owns the allocation: the scheduler,
// what the claims allocated so far hold (state), the group or gang being
// placed and the spares a gang is given. What the other stages own is in
// the types it holds (doc.go lists them).
type runner struct {
	ctx    context.Context
	opts   Options
	feats  scheduler.Features
	sched  *scheduler.Scheduler
	report *Report
	inv    *inventory
	// eval evaluates classes and selectors on the inventory's devices.
	eval *evaluator
	// known are the DeviceClasses the cluster would have: the inputs' and
	// the built-in ones they do not replace (shared with eval).
	known   map[string]scheduler.Object
	builtin map[string]bool // known classes that come from gpudra
	// classesForScheduler serve the allocator and map extended resources.
	classesForScheduler *scheduler.Classes
	// findings is where everything found is reported, once each.
	findings *findingLog
	// state is what allocated claims hold (sequential mode keeps it), as
	// the scheduler sees it; prep.held is what the nodes' plugins prepared.
	state *scheduler.State
	// pub republishes nodes as claims are prepared on them; prep runs
	// the prepare-time checks.
	pub  *publisher
	prep *preparer
	// nvlink says which claims and gangs ask for NVLink domains.
	nvlink *nvlinkDomains
	// clusterState and clusterHeld are what a live cluster's allocated
	// claims hold (Options.Held), as the scheduler and the nodes' plugins
	// see it: where each allocation starts.
	clusterState *scheduler.State
	clusterHeld  []heldDevice
	// inGang is set while a gang's pods are placed: they see what is
	// published before any of them binds, unless gangRefill is set too.
	inGang, gangRefill bool
	// gangSpares, while gangFitsWithFleetSpares tries a gang, are the
	// spares given to its pods.
	gangSpares *gangSpares
	// migCapable and migPublishing count the nodes with a GPU that can
	// take a MIG spare and those publishing MIG placements
	// (sparesAssumed).
	migCapable, migPublishing int
	// group is the unit group the state is of, without --sequential.
	group string
	// pending are the workloads' Pending replicas.
	pending *pendingLog
	// gangs are the inputs' PodGroups by "namespace/name" (podgroups.go);
	// nodeObjs the inputs' Node objects (gangs.go).
	gangs    map[string]*gangInfo
	nodeObjs []*v1.Node
	// fence, while a gang is tried in one NVLink domain (nvlink.go),
	// admits only that domain's nodes.
	fence func(*v1.Node) bool
}

// withDefaults fills in the options left unset.
func (opts Options) withDefaults() Options {
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = scheduler.DefaultKubernetesVersion
	}
	if opts.DriverName == "" {
		opts.DriverName = gpu.DefaultDriverName
	}
	if opts.ListLimit == 0 {
		opts.ListLimit = 64
	}
	if opts.AllocateTimeout == 0 {
		opts.AllocateTimeout = scheduler.DefaultFilterTimeout
	}
	return opts
}

// Run checks the inputs. It returns a *scheduler.InputError when they
// cannot be used; everything else is in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	feats, err := scheduler.FeaturesFor(opts.KubernetesVersion)
	if err != nil {
		return nil, &scheduler.InputError{Msg: "--kubernetes-version: " + err.Error()}
	}
	shareSharing, err := shareSharingOf(opts.ShareSharing)
	if err != nil {
		return nil, &scheduler.InputError{Msg: "--consumable-capacity-sharing: " + err.Error()}
	}
	in := opts.Inputs
	if in == nil {
		in = &scheduler.Manifests{}
	}
	if in.Empty() && opts.Slices == nil {
		return nil, &scheduler.InputError{Msg: "nothing to check: give YAML files or directories with DeviceClasses, ResourceClaimTemplates, ResourceClaims, Pods (or workloads) or ResourceSlices"}
	}
	r := &runner{
		ctx: ctx, opts: opts, feats: feats,
		report: &Report{
			KubernetesVersion: feats.Version,
			Sequential:        opts.Sequential,
			Strict:            opts.Strict,
		},
		known:        map[string]scheduler.Object{},
		builtin:      map[string]bool{},
		clusterState: scheduler.StateOf(opts.Held),
	}
	r.findings = newFindingLog(r.report, feats, r.builtin)
	r.pending = newPendingLog(r.report, r.findings)
	r.state = r.clusterState.Clone()
	for _, i := range in.Ignored {
		r.report.Ignored = append(r.report.Ignored, i.String())
	}
	for _, p := range in.Problems {
		r.findings.addProblem(p)
	}
	if err := r.loadClasses(in); err != nil {
		return nil, err
	}
	r.loadPodGroups(in)
	r.loadInventory(in)
	r.eval = newEvaluator(ctx, opts, feats, r.inv, r.report, r.findings, r.known, r.builtin)
	r.prep = &preparer{
		opts: opts, inv: r.inv, report: r.report, findings: r.findings, pub: r.pub,
		known: r.known, builtin: r.builtin, shareSharing: shareSharing,
	}
	r.clusterHeld = r.prep.clusterHolds(opts.Held)
	r.prep.held = slices.Clone(r.clusterHeld)
	units := (&unitBuilder{
		opts: opts, feats: feats, sched: r.sched, inv: r.inv, report: r.report,
		findings: r.findings, eval: r.eval, known: r.known, namespaces: namespacesOf(in),
		gangs: r.gangs, progress: r.progress,
	}).build(in)
	(&quotaChecker{feats: feats, report: r.report, findings: r.findings, known: r.known}).check(in.Quotas, units)
	r.nvlink.sharedChannelClaims(units)
	r.allocateAll(units)
	for _, u := range units {
		if u.pod != "" {
			r.report.Pods = append(r.report.Pods, podInfo(r.report, u))
		}
	}
	// Classes no claim used are still checked: they are inputs.
	r.findings.unusedClass = len(in.Claims)+len(in.Templates)+len(in.Pods) > 0
	for _, o := range in.Classes {
		r.eval.class(o.Obj.(*resourceapi.DeviceClass).Name)
	}
	r.findings.unusedClass = false
	r.finish()
	return r.report, nil
}

// progress tells Options.Progress how far a stage got.
func (r *runner) progress(stage string, done, total int) {
	if r.opts.Progress != nil {
		r.opts.Progress(stage, done, total)
	}
}

// loadClasses makes the inputs' DeviceClasses and the built-in ones known.
// An input class with the name of a built-in one replaces it, as applying
// it would: a finding when it differs.
func (r *runner) loadClasses(in *scheduler.Manifests) error {
	for _, o := range in.Classes {
		name := o.Obj.(*resourceapi.DeviceClass).Name
		if prev, dup := r.known[name]; dup {
			r.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: "DeviceClass " + name,
				Message: fmt.Sprintf("DeviceClass defined twice (also at %s); the later one is used", prev.Source)})
		}
		r.known[name] = o
	}
	var gpudras map[string]bool // the names of gpudra's own classes
	if len(r.opts.ClusterClasses) > 0 {
		builtin, err := builtinClasses(r.opts.DriverName)
		if err != nil {
			return err
		}
		gpudras = map[string]bool{}
		for _, b := range builtin {
			gpudras[b.Name] = true
		}
	}
	for _, dc := range r.opts.ClusterClasses {
		if _, shadowed := r.known[dc.Name]; !shadowed {
			r.known[dc.Name] = scheduler.Object{Source: scheduler.Source{File: "(cluster)"}, Kind: "DeviceClass", Name: dc.Name, Obj: dc, Replicas: 1}
			// The chart installed it: that it matches nothing here (no
			// node publishes MIG placements at this moment, spares
			// come and go) is not the class's fault, as for the
			// built-in classes; the claims that use it say so.
			r.builtin[dc.Name] = gpudras[dc.Name]
		}
	}
	if r.opts.BuiltinClasses {
		builtin, err := builtinClasses(r.opts.DriverName)
		if err != nil {
			return err
		}
		for _, b := range builtin {
			dc := b.Obj.(*resourceapi.DeviceClass)
			o, shadowed := r.known[dc.Name]
			if !shadowed {
				r.known[dc.Name] = b
				r.builtin[dc.Name] = true
				continue
			}
			if mine := o.Obj.(*resourceapi.DeviceClass); !reflect.DeepEqual(mine.Spec, dc.Spec) {
				r.findings.add(Finding{Kind: FindingShadowsBuiltin, Severity: SeverityWarning, Source: o.Source, Object: "DeviceClass " + dc.Name,
					Message: fmt.Sprintf("DeviceClass %s is also one of gpudra's own, which the Helm chart installs; yours differs from it and would replace it (or be replaced by the next helm upgrade)", dc.Name),
					Hint:    "give your class a name of its own, or drop it and use gpudra's (gpudra check --examples shows it)"})
			}
		}
	}
	objs := make([]*resourceapi.DeviceClass, 0, len(r.known))
	for _, name := range sortedKeys(r.known) {
		objs = append(objs, r.known[name].Obj.(*resourceapi.DeviceClass))
	}
	r.classesForScheduler = scheduler.NewClasses(objs)
	return nil
}

// builtinClasses are the DeviceClasses shipped in deviceclasses/, as the
// Helm chart renders them for a driver name: every "gpu.gpudra.io" (class
// names, selectors, attribute domains) becomes the driver name; with
// another driver name than the default, the other classes are renamed
// (mig.gpudra.io becomes mig.<driver name>) and map no extended resource
// names, which stay with the default installation
// (templates/deviceclasses.yaml).
func builtinClasses(driverName string) ([]scheduler.Object, error) {
	files, err := fs.Glob(deviceclasses.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	in := &scheduler.Manifests{}
	for _, f := range files {
		data, err := fs.ReadFile(deviceclasses.FS, f)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte(gpu.DefaultDriverName), []byte(driverName))
		if err := in.Add("(built in) deviceclasses/"+f, data); err != nil {
			return nil, err
		}
	}
	if driverName != gpu.DefaultDriverName {
		for _, o := range in.Classes {
			dc := o.Obj.(*resourceapi.DeviceClass)
			dc.Name = builtinClassName(dc.Name, driverName)
			dc.Spec.ExtendedResourceName = nil
		}
	}
	return in.Classes, nil
}

// builtinClassName is the name the chart gives one of gpudra's classes
// (named for the default driver, or already renamed) for a driver name.
func builtinClassName(name, driverName string) string {
	if driverName == gpu.DefaultDriverName || name == driverName {
		return name
	}
	if base, ok := strings.CutSuffix(name, ".gpudra.io"); ok {
		return base + "." + driverName
	}
	return name
}

func (r *runner) loadInventory(in *scheduler.Manifests) {
	var all []*resourceapi.ResourceSlice
	var sources []string
	if r.opts.Slices != nil {
		all = append(all, r.opts.Slices...)
		src := r.opts.SlicesSource
		if src == "" {
			src = "ResourceSlices given by the caller"
		}
		sources = append(sources, src)
	}
	for _, o := range in.Slices {
		all = append(all, o.Obj.(*resourceapi.ResourceSlice))
	}
	// The API server of the chosen version stores slices without the
	// fields of the features it does not enable.
	dropped, partitions := 0, 0
	if !r.feats.Allocator.PartitionableDevices || !r.feats.Allocator.ConsumableCapacity || !r.feats.Allocator.DeviceTaints || !r.feats.Allocator.DeviceBindingAndStatus {
		for i, s := range all {
			c := s.DeepCopy()
			n := 0
			if !r.feats.Allocator.PartitionableDevices {
				n = dropPartitions(c, r.opts.DriverName)
			}
			if scheduler.DropDisabledFields(c, r.feats) || n > 0 {
				all[i] = c
				dropped++
				partitions += n
			}
		}
	}
	notes := r.opts.SlicesNotes
	if dropped > 0 && len(notes) == 0 {
		notes = append(notes, fmt.Sprintf("%d ResourceSlice(s) read as the API server of Kubernetes %s stores them: without the fields of the DRA features it does not enable (counters, device taints, consumable capacity)", dropped, r.feats.Version))
	}
	if partitions > 0 {
		notes = append(notes, fmt.Sprintf("%d MIG placement(s) of %s left out: on Kubernetes %s, which does not serve partitionable devices, gpudra's plugin publishes whole GPUs only", partitions, r.opts.DriverName, r.feats.Version))
	}
	if len(in.Slices) > 0 {
		sources = append(sources, fmt.Sprintf("%d ResourceSlice(s) from the input files", len(in.Slices)))
	}
	var rules []*resourceapi.DeviceTaintRule
	for _, o := range in.TaintRules {
		switch {
		case r.feats.DeviceTaintRules:
			rules = append(rules, o.Obj.(*resourceapi.DeviceTaintRule))
		case !r.findings.notServedAt[o.Source.String()]:
			r.findings.notServed(scheduler.Problem{GVK: resourceapi.SchemeGroupVersion.WithKind("DeviceTaintRule")},
				Finding{Source: o.Source.At("apiVersion"), Object: "DeviceTaintRule " + o.Name, Field: "apiVersion"})
		}
	}
	r.sched = scheduler.New(r.feats, r.classesForScheduler, all, rules)
	r.sched.FilterTimeout = r.opts.AllocateTimeout
	for _, o := range in.Nodes {
		r.nodeObjs = append(r.nodeObjs, o.Obj.(*v1.Node))
	}
	r.sched.UseNodes(r.nodeObjs)
	if note := labelNVLinkDomains(r.sched, r.nodeObjs, r.opts.DriverName); note != "" {
		notes = append(notes, note)
	}
	r.inv = newInventory(r.sched.Slices(), r.sched.Nodes())
	r.nvlink = &nvlinkDomains{opts: r.opts, sched: r.sched, inv: r.inv, findings: r.findings}
	r.pub = &publisher{ctx: r.ctx, opts: r.opts, sched: r.sched, inv: r.inv, findings: r.findings, nodes: map[string]gpu.Node{}}
	r.report.Inventory = InventoryInfo{
		Source:  strings.Join(sources, "; "),
		Notes:   notes,
		Spares:  r.sparesAssumed(),
		Drivers: sortedKeys(r.inv.drivers),
		Nodes:   len(r.inv.nodes),
		Slices:  len(all),
		Devices: len(r.inv.devices),
	}
	if len(r.inv.devices) == 0 {
		r.findings.add(Finding{Kind: FindingEmptyInventory, Message: "the inventory holds no devices: nothing can match or be allocated"})
	}
}
