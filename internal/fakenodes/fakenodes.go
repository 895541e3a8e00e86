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

// Package fakenodes builds the ResourceSlices gpudra's kubelet plugin
// publishes on fake nodes of a profile: for each node it opens the fake
// NVML backend (in a throw-away state directory), discovers the GPUs,
// calls the plugin's own slice builder, and turns each pool into the
// ResourceSlice objects the ResourceSlice controller would create. This is
// the inventory `gpudra check` runs against when no slices are given; it
// lives apart from internal/check and internal/scheduler because it needs the NVML
// backend (cgo), which they must not link.
package fakenodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// DefaultProfile is the node `gpudra check` and `gpudra simulate` use
// when told of none: a DGX H100.
const DefaultProfile = "dgx-h100"

// NodeName is the name of fake node i (1-based): node-1 … node-N. The
// fake GPUs' UUIDs and PCI addresses are seeded by it, as on the plugin.
func NodeName(i int) string { return "node-" + strconv.Itoa(i) }

// Pool is how the plugin of the fake nodes publishes: the settings of
// their node pool.
type Pool struct {
	// ConsumableCapacity publishes shareable whole GPUs, as the plugin's
	// --consumable-capacity.
	ConsumableCapacity bool
	// MigProfiles are the MIG profiles published, as the plugin's
	// --mig-profiles (the zero value: all).
	MigProfiles slicebuilder.MigProfiles
	// SpareGPUs is how many free GPUs publish their MIG placements, as the
	// plugin's --mig-spare-gpus (the zero value: the default). The fake
	// nodes are idle, as the plugin publishes a node nothing is prepared
	// on: only the spares' placements are published.
	SpareGPUs slicebuilder.SpareGPUs
	// SpareNodes, in fleet mode (SpareGPUs.Fleet), is how many of the
	// nodes gpudra-controller keeps a spare on: node-1 … node-SpareNodes
	// publish SpareGPUs.N spares, the others none until the controller
	// assigns them one (0: every node keeps one).
	SpareNodes int
	// WholeGPUsOnly publishes whole GPUs without MIG placements, as the
	// plugin does once the API server dropped its counters (a cluster
	// without DRAPartitionableDevices).
	WholeGPUsOnly bool
	// Features, when set, is the cluster's feature set: the slices are
	// stored as its API server stores them (scheduler.DropDisabledFields).
	Features *scheduler.Features
}

// On is the pool as the plugin publishes it on a cluster with the feature
// set: it falls back to whole GPUs where the API server drops partitionable
// devices, and to exclusive GPUs where it drops consumable capacity
// (internal/plugin, HandleError), and the API server drops the device taints
// where DRADeviceTaints is off. The notes say what differs from the
// newest Kubernetes, for the report.
func (p Pool) On(f scheduler.Features) (Pool, []string) {
	var notes []string
	p.Features = &f
	if !f.Allocator.PartitionableDevices {
		p.WholeGPUsOnly = true
		notes = append(notes, fmt.Sprintf("Kubernetes %s does not serve partitionable devices (DRAPartitionableDevices is off by default before 1.36): the plugin publishes whole GPUs only, without MIG partitions", f.Version))
	}
	if !f.Allocator.ConsumableCapacity && p.ConsumableCapacity {
		p.ConsumableCapacity = false
		notes = append(notes, fmt.Sprintf("Kubernetes %s does not serve consumable capacity (DRAConsumableCapacity is off by default before 1.36): the plugin publishes exclusive GPUs, one claim each", f.Version))
	}
	if !f.Allocator.DeviceTaints {
		notes = append(notes, fmt.Sprintf("Kubernetes %s drops device taints (DRADeviceTaints is off by default before 1.36): no GPU is tainted unhealthy, and the monitoring devices carry no monitoring-only taint", f.Version))
	}
	return p, notes
}

// ForNode is the pool as the plugin of node nodeName publishes it: in
// fleet mode, a node beyond SpareNodes is one the controller assigned no
// spare.
func (p Pool) ForNode(nodeName string) Pool {
	if !p.SpareGPUs.Fleet || p.SpareNodes <= 0 {
		return p
	}
	// Fake nodes are alike, so which ones keep a spare is only a matter
	// of order; the controller's own choice is hashed from the names.
	if i, err := strconv.Atoi(strings.TrimPrefix(nodeName, "node-")); err == nil && i > p.SpareNodes {
		p.SpareGPUs = slicebuilder.FleetAssigned(0)
	}
	return p
}

// KeepsSpare says whether node nodeName keeps a spare before the
// controller assigns it one: not in fleet mode, every node with a free
// GPU does.
func (p Pool) KeepsSpare(nodeName string) bool {
	return !p.SpareGPUs.Fleet || p.ForNode(nodeName).SpareGPUs.N > 0
}

// Slices returns the ResourceSlices of nodes fake nodes of a profile (a
// built-in name or a profile file), published under driverName.
func Slices(ctx context.Context, profile string, nodes int, driverName string) ([]*resourceapi.ResourceSlice, error) {
	return SlicesOf(ctx, profile, nodes, driverName, Pool{})
}

// SlicesOf is Slices on a node pool with the given settings.
func SlicesOf(ctx context.Context, profile string, nodes int, driverName string, pool Pool) ([]*resourceapi.ResourceSlice, error) {
	return SlicesWithProgress(ctx, profile, nodes, driverName, pool, nil)
}

// SlicesWithProgress is SlicesOf telling progress, if set, how many nodes
// are built after each one (from the goroutines that build them, one call
// at a time): a thousand nodes take tens of seconds.
func SlicesWithProgress(ctx context.Context, profile string, nodes int, driverName string, pool Pool, progress func(built int)) ([]*resourceapi.ResourceSlice, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("the number of nodes must be at least 1, got %d", nodes)
	}
	dir, err := os.MkdirTemp(scratchDir(), "gpudra-fakenodes-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the fake GPUs' state: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// Nodes are independent (each has its own fake GPUs and state
	// directory); building them side by side hides the file system's
	// latency, which dominates.
	perNode := make([][]*resourceapi.ResourceSlice, nodes)
	errs := make([]error, nodes)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards built and the calls to progress
	built := 0
	for range min(nodes, 2*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				perNode[i], errs[i] = Node(ctx, profile, NodeName(i+1), driverName, dir, pool.ForNode(NodeName(i+1)))
				if progress != nil {
					mu.Lock()
					built++
					progress(built)
					mu.Unlock()
				}
			}
		})
	}
	for i := range nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []*resourceapi.ResourceSlice
	for i := range nodes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, perNode[i]...)
	}
	return append(out, ChannelPoolSlices(driverName, out)...), nil
}

// ChannelPoolSlices are the IMEX channel pools gpudra-controller publishes
// (with its default --nvlink-channels) for the NVLink domains of the given
// node slices: one pool per nvlinkDomain their GPUs carry, whose node
// selector lets in the nodes the controller labels with it.
func ChannelPoolSlices(driverName string, nodeSlices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	seen := map[string]bool{}
	var domains []string
	for _, s := range nodeSlices {
		if s.Spec.Driver != driverName || s.Spec.NodeName == nil {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[slicebuilder.AttrNVLinkDomain]; ok && a.StringValue != nil && !seen[*a.StringValue] {
				seen[*a.StringValue] = true
				domains = append(domains, *a.StringValue)
			}
		}
	}
	sort.Strings(domains)
	var out []*resourceapi.ResourceSlice
	for _, domain := range domains {
		// Named per domain: PoolSlices numbers a pool's slices from 0.
		out = append(out, PoolSlices(driverName, "nvlink-"+domain, *slicebuilder.ChannelPools(driverName, []string{domain}, slicebuilder.DefaultChannels))...)
	}
	return out
}

// Node opens the fake backend for one node (its state in a directory
// below dir, removed afterwards), discovers its GPUs and builds its
// slices, as the plugin does at start-up.
func Node(ctx context.Context, profile, nodeName, driverName, dir string, pool Pool) ([]*resourceapi.ResourceSlice, error) {
	var out []*resourceapi.ResourceSlice
	err := WithNode(ctx, profile, nodeName, dir, func(node gpu.Node, sysfsRoot string) error {
		res, err := slicebuilder.Build(node, slicebuilder.Options{DriverName: driverName, SysfsRoot: sysfsRoot, ConsumableCapacity: pool.ConsumableCapacity,
			MigProfiles: pool.MigProfiles, WholeGPUsOnly: pool.WholeGPUsOnly, SpareGPUs: pool.SpareGPUs})
		if err != nil {
			return err
		}
		out = PoolSlices(driverName, nodeName, res)
		if pool.Features != nil {
			for _, s := range out {
				scheduler.DropDisabledFields(s, *pool.Features)
			}
		}
		return nil
	})
	return out, err
}

// WithNode opens the fake backend for one node (its state in a directory
// below dir, removed afterwards), discovers its GPUs as the plugin does,
// and calls fn with them and the root under which their sysfs entries
// resolve (slicebuilder.Options.SysfsRoot), valid only during the call:
// for callers that build the slices with options of their own.
func WithNode(ctx context.Context, profile, nodeName, dir string, fn func(node gpu.Node, sysfsRoot string) error) error {
	stateDir := filepath.Join(dir, nodeName)
	defer func() { _ = os.RemoveAll(stateDir) }()
	be, err := backend.Open(ctx, backend.Options{
		Kind:          "fake",
		NodeName:      nodeName,
		FakeProfile:   profile,
		FakeStateDir:  stateDir,
		DriverRoot:    "/",
		InventoryOnly: true,
	})
	if err != nil {
		return err
	}
	node, err := be.Discover(ctx)
	if err == nil {
		err = fn(node, be.SysfsRoot())
	}
	if cerr := be.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("profile %s, %s: %w", profile, nodeName, err)
	}
	return nil
}

// scratchDir is where the fake nodes keep their throw-away state: a
// memory file system when there is one.
func scratchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".gpudra-probe-"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// PoolSlices turns the DriverResources of one node into the ResourceSlice
// objects the ResourceSlice controller (k8s.io/dynamic-resource-allocation/
// resourceslice) creates for them: one object per Slice, in order, owned by
// the node, with the pool's generation and slice count filled in, and
// named as the controller names them, after their index in hexadecimal,
// zero-padded to five digits (the allocator walks a pool's slices in name
// order; "10" would sort before "2").
func PoolSlices(driverName, nodeName string, res resourceslice.DriverResources) []*resourceapi.ResourceSlice {
	pools := make([]string, 0, len(res.Pools))
	for name := range res.Pools {
		pools = append(pools, name)
	}
	sort.Strings(pools)
	var out []*resourceapi.ResourceSlice
	for _, poolName := range pools {
		pool := res.Pools[poolName]
		width := max(5, len(strconv.FormatInt(int64(len(pool.Slices)-1), 16)))
		for i, s := range pool.Slices {
			slice := &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%0*x-%s-%s", width, i, driverName, nodeName)},
				Spec: resourceapi.ResourceSliceSpec{
					Driver: driverName,
					Pool: resourceapi.ResourcePool{
						Name:               poolName,
						Generation:         max(pool.Generation, 1),
						ResourceSliceCount: int64(len(pool.Slices)),
					},
					NodeSelector:           pool.NodeSelector,
					Devices:                s.Devices,
					SharedCounters:         s.SharedCounters,
					PerDeviceNodeSelection: s.PerDeviceNodeSelection,
					PartitionTypeAttribute: s.PartitionTypeAttribute,
					SkipNodeOperations:     s.SkipNodeOperations,
				},
			}
			switch {
			case pool.AllNodes:
				slice.Spec.AllNodes = new(true)
			case pool.NodeSelector == nil:
				slice.Spec.NodeName = new(nodeName)
			}
			out = append(out, slice)
		}
	}
	return out
}

// Republisher says what fake nodes publish once claims are prepared on
// them, as the plugin republishes after each prepare: a GPU held whole
// hides its MIG placements, a spare partitioned makes the next GPU a
// spare, and a GPU that published its placements keeps them while it is
// free. What a node publishes depends on the order its claims were
// prepared in, so Slices replays them one at a time. It is safe for
// concurrent use.
type Republisher struct {
	profile, driverName string
	pool                Pool
	mu                  sync.Mutex // one fake backend per node directory at a time
	dir                 string
}

// NewRepublisher returns a Republisher for fake nodes of the profile; Close
// it to remove its scratch directory.
func NewRepublisher(profile, driverName string, pool Pool) (*Republisher, error) {
	dir, err := os.MkdirTemp(scratchDir(), "gpudra-fakenodes-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the fake GPUs' state: %w", err)
	}
	return &Republisher{profile: profile, driverName: driverName, pool: pool, dir: dir}, nil
}

// Close removes the scratch directory.
func (r *Republisher) Close() error { return os.RemoveAll(r.dir) }

// Slices returns the slices fake node nodeName publishes once the claims
// in prepared (one entry per claim, in the order they were prepared, each
// the devices it holds) are prepared. Results of other drivers and
// admin-access results hold nothing, as on the plugin.
func (r *Republisher) Slices(ctx context.Context, nodeName string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	return r.slices(ctx, nodeName, r.pool.ForNode(nodeName), prepared)
}

// SparedSlices is Slices once gpudra-controller gave the node a spare,
// for a node that keeps none (fleet mode, beyond Pool.SpareNodes); nil
// for the others, which publish that already.
func (r *Republisher) SparedSlices(ctx context.Context, nodeName string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	if r.pool.KeepsSpare(nodeName) || r.pool.WholeGPUsOnly {
		return nil, nil
	}
	pool := r.pool
	pool.SpareGPUs = slicebuilder.FleetAssigned(1)
	return r.slices(ctx, nodeName, pool, prepared)
}

func (r *Republisher) slices(ctx context.Context, nodeName string, pool Pool, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*resourceapi.ResourceSlice
	err := WithNode(ctx, r.profile, nodeName, r.dir, func(node gpu.Node, sysfsRoot string) error {
		opts := slicebuilder.Options{DriverName: r.driverName, SysfsRoot: sysfsRoot, ConsumableCapacity: pool.ConsumableCapacity,
			MigProfiles: pool.MigProfiles, WholeGPUsOnly: pool.WholeGPUsOnly, SpareGPUs: pool.SpareGPUs}
		// What the node published before anything was prepared, then
		// after each prepare.
		plan, err := slicebuilder.Plan(node, opts)
		if err != nil {
			return err
		}
		var held []resourceapi.DeviceRequestAllocationResult
		for _, claim := range prepared {
			held = append(held, claim...)
			opts.MigReady, opts.InUse = plan.MigReady, inUse(node, r.driverName, held)
			if plan, err = slicebuilder.Plan(node, opts); err != nil {
				return err
			}
		}
		out = PoolSlices(r.driverName, nodeName, plan.Resources)
		if r.pool.Features != nil {
			for _, s := range out {
				scheduler.DropDisabledFields(s, *r.pool.Features)
			}
		}
		return nil
	})
	return out, err
}

// inUse is how the allocated devices hold the node's GPUs, as the plugin's
// node state says once their claims are prepared.
func inUse(node gpu.Node, driverName string, held []resourceapi.DeviceRequestAllocationResult) map[string]gpu.Use {
	byMinor := map[int]string{}
	for _, g := range node.GPUs {
		byMinor[g.Minor] = g.UUID
	}
	out := map[string]gpu.Use{}
	for _, d := range held {
		if d.Driver != driverName || (d.AdminAccess != nil && *d.AdminAccess) {
			continue
		}
		name, ok := gpu.ParseDeviceName(d.Device)
		uuid, known := byMinor[name.Minor]
		switch {
		case !ok || !known || name.Monitor:
		case name.MIG:
			out[uuid] = gpu.UsedByMIG
		default:
			out[uuid] = gpu.UsedWhole
		}
	}
	return out
}
