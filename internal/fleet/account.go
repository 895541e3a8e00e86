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
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Inputs are the objects the accounting reads, as the controller's
// informers hold them.
type Inputs struct {
	DriverName string
	// Slices are ResourceSlices in full (from files, a listing, tests);
	// Compact are more, as the controller's informer keeps them
	// (Compactor). The accounting reads both.
	Slices  []*resourceapi.ResourceSlice
	Compact []*CompactSlice
	Claims  []*resourceapi.ResourceClaim
	Classes []*resourceapi.DeviceClass
	Pods    []*corev1.Pod
	Nodes   []*corev1.Node
	// TaintRules (DRADeviceTaintRules) taint devices in the scheduler's
	// view, when Features enables them.
	TaintRules []*resourceapi.DeviceTaintRule
	// PodGroups (the Workload API, GenericWorkload) say which pods are a
	// gang: placed all or nothing, at least minCount of them.
	PodGroups []*schedulingv1beta1.PodGroup
	// Features is the cluster's DRA feature set (scheduler.FeaturesFor
	// its version); empty means scheduler.DefaultFeatures.
	Features scheduler.Features
	// PoolLabels name a node's pool (NodePool); nil: every node is in
	// one pool.
	PoolLabels []string
	Now        time.Time
}

// DeviceKey groups devices for the metrics.
type DeviceKey struct {
	Node, Model, Type, Profile string
}

// DeviceCounts are the devices of one group.
type DeviceCounts struct {
	Published int
	// Shareable counts the published devices that take several
	// allocations (SharingShareable); the others are SharingExclusive.
	Shareable int
	// Allocated counts devices in an allocation; admin access does not
	// allocate. A shareable device that several claims hold counts once.
	Allocated int
	// AllocatedBySharing splits Allocated by the values of
	// AllocatedSharing: each device under the strongest of the values
	// its allocations have (see allocationSharing).
	AllocatedBySharing map[string]int
	Tainted            int
}

// GPUKey groups whole GPUs.
type GPUKey struct {
	Node, Model string
}

// GPUCounts say what the GPUs of one group are used for.
type GPUCounts struct {
	// Free GPUs have nothing allocated: neither the GPU nor a partition.
	Free int
	// Whole GPUs are allocated as a whole.
	Whole int
	// Partitioned GPUs have at least one MIG partition allocated.
	Partitioned int
}

// Snapshot is the fleet's accounting at one moment.
type Snapshot struct {
	Devices map[DeviceKey]DeviceCounts
	GPUs    map[GPUKey]GPUCounts
	// AllocatedClaims are the claims with an allocation of this driver.
	AllocatedClaims int
	// Stranding is what Strander.Recompute adds: stranded GPUs and
	// unsatisfiable pods.
	Stranding Stranding
	// PendingClaims wait for an allocation, for this driver; Pending
	// lists them, oldest first.
	Pending []PendingClaim
	// MIG is, by node, what its partitionable GPUs are used for and
	// whether they publish their placements: the view gpudra-controller
	// picks the nodes that keep a spare from (migview.go).
	MIG map[string]MIGNode
}

// PendingClaim is a claim that waits for devices.
type PendingClaim struct {
	Namespace, Name string
	Age             time.Duration
}

// OldestPendingAge is how long the oldest pending claim has waited; 0 when
// none waits.
func (s Snapshot) OldestPendingAge() time.Duration {
	if len(s.Pending) == 0 {
		return 0
	}
	return s.Pending[0].Age
}

// Account computes a snapshot.
func Account(in Inputs) Snapshot {
	inv := newInventory(&sliceCache{driver: in.DriverName}, in.compactSlices(&Compactor{}), in.Nodes, in.PoolLabels)
	return account(in, inv, allocatedDevices(in.DriverName, in.Claims))
}

// compactSlices are all the inputs' slices in compact form.
func (in Inputs) compactSlices(c *Compactor) []*CompactSlice {
	if len(in.Slices) == 0 {
		return in.Compact
	}
	out := make([]*CompactSlice, 0, len(in.Compact)+len(in.Slices))
	out = append(out, in.Compact...)
	for _, s := range in.Slices {
		out = append(out, c.Compact(s))
	}
	return out
}

// account is Account over an inventory and allocations already read.
func account(in Inputs, inv inventory, alloc map[DeviceID]bool) Snapshot {
	snap := Snapshot{Devices: map[DeviceKey]DeviceCounts{}, GPUs: map[GPUKey]GPUCounts{}}
	sharing := allocationSharing(in.DriverName, in.Claims, inv)
	partitioned := map[string]bool{} // parent UUIDs with a partition allocated
	for _, d := range inv.devices {
		if d.Type == slicebuilder.TypeMIG && alloc[d.ID] {
			partitioned[d.ParentUUID] = true
		}
	}
	for _, d := range inv.devices {
		if d.Type == slicebuilder.TypeMonitor {
			continue // a view of a GPU for monitoring pods, not capacity
		}
		k := DeviceKey{Node: d.Node, Model: d.Model, Type: d.Type, Profile: d.Profile}
		c := snap.Devices[k]
		c.Published++
		if d.Shareable {
			c.Shareable++
		}
		if alloc[d.ID] {
			c.Allocated++
			c.AllocatedBySharing = increment(c.AllocatedBySharing, cmp.Or(sharing[d.ID], SharingNone))
		}
		if len(d.Taints) > 0 {
			c.Tainted++
		}
		snap.Devices[k] = c

		if d.Type != slicebuilder.TypeGPU {
			continue
		}
		gk := GPUKey{Node: d.Node, Model: d.Model}
		g := snap.GPUs[gk]
		switch {
		case alloc[d.ID]:
			g.Whole++
		case partitioned[d.UUID]:
			g.Partitioned++
		default:
			g.Free++
		}
		snap.GPUs[gk] = g
	}

	snap.MIG = migNodes(inv, alloc, partitioned)

	ours := driverClasses(in.DriverName, in.Classes)
	used := claimsInUse(in.Pods)
	for _, c := range in.Claims {
		if c.Status.Allocation != nil {
			if hasDriverResult(in.DriverName, c.Status.Allocation) {
				snap.AllocatedClaims++
			}
			continue
		}
		if c.DeletionTimestamp != nil || !used[c.Namespace+"/"+c.Name] || !requestsClass(c, ours) {
			continue
		}
		snap.Pending = append(snap.Pending, PendingClaim{Namespace: c.Namespace, Name: c.Name, Age: in.Now.Sub(c.CreationTimestamp.Time)})
	}
	slices.SortFunc(snap.Pending, func(a, b PendingClaim) int {
		return cmp.Or(cmp.Compare(b.Age, a.Age), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return snap
}

// increment adds one to m[k], making m if it is nil.
func increment(m map[string]int, k string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k]++
	return m
}

// allocatedDevices are the driver's devices in some claim's allocation,
// not counting admin access, which does not take the device.
func allocatedDevices(driver string, claims []*resourceapi.ResourceClaim) map[DeviceID]bool {
	out := map[DeviceID]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driver && (r.AdminAccess == nil || !*r.AdminAccess) {
				out[DeviceID{Pool: r.Pool, Device: r.Device}] = true
			}
		}
	}
	return out
}

func hasDriverResult(driver string, a *resourceapi.AllocationResult) bool {
	return slices.ContainsFunc(a.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool { return r.Driver == driver })
}

// driverClasses are the names of the DeviceClasses that select the
// driver's devices: a selector compares device.driver with the driver's
// name, or the class configures the driver.
func driverClasses(driver string, classes []*resourceapi.DeviceClass) map[string]bool {
	out := map[string]bool{}
	quoted := []string{"'" + driver + "'", `"` + driver + `"`}
	for _, c := range classes {
		for _, s := range c.Spec.Selectors {
			if s.CEL != nil && strings.Contains(s.CEL.Expression, "device.driver") &&
				(strings.Contains(s.CEL.Expression, quoted[0]) || strings.Contains(s.CEL.Expression, quoted[1])) {
				out[c.Name] = true
			}
		}
		for _, cfg := range c.Spec.Config {
			if cfg.Opaque != nil && cfg.Opaque.Driver == driver {
				out[c.Name] = true
			}
		}
	}
	return out
}

// requestsClass reports whether a request (or one of its alternatives)
// names one of the classes.
func requestsClass(c *resourceapi.ResourceClaim, classes map[string]bool) bool {
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && classes[r.Exactly.DeviceClassName] {
			return true
		}
		for _, sub := range r.FirstAvailable {
			if classes[sub.DeviceClassName] {
				return true
			}
		}
	}
	return false
}

// claimsInUse are the claims ("namespace/name") that pods which have not
// finished reference.
func claimsInUse(pods []*corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		generated := map[string]string{}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				generated[s.Name] = *s.ResourceClaimName
			}
		}
		for _, rc := range p.Spec.ResourceClaims {
			switch {
			case rc.ResourceClaimName != nil:
				out[p.Namespace+"/"+*rc.ResourceClaimName] = true
			case generated[rc.Name] != "":
				out[p.Namespace+"/"+generated[rc.Name]] = true
			}
		}
	}
	return out
}
