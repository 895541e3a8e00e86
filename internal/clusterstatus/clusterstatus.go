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

// Package clusterstatus puts a cluster's ResourceSlices and ResourceClaims
// together into what `gpudra status` shows: per node every GPU of one
// driver, its MIG partitions and shares, its health and taints, the claim,
// namespace and pods holding each, the device UUIDs the kubelet plugin
// reported in the claims' status.devices, and what is free (whole GPUs,
// MIG placements, memory of shared GPUs).
//
// It reads plain API objects (internal/clusterread fetches them, tests write
// them). A whole GPU is free when no claim holds it (or any partition of
// it) and no NoSchedule taint keeps claims away. The room for MIG
// partitions is counted per profile, one profile at a time: how many more
// partitions of that profile the published placements and what is left
// of the GPU's counters (memory slices, multiprocessors, engines,
// per-profile limits) allow, as the scheduler would give them out.
package clusterstatus

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Report is the whole view.
type Report struct {
	Driver string `json:"driver"`
	// Namespace, when set, limits the claims and pods shown to one
	// namespace (devices held elsewhere show as held, without names).
	Namespace string `json:"namespace,omitempty"`
	Nodes     []Node `json:"nodes"`
	// Domains are the NVLink domains whose IMEX channel pools
	// gpudra-controller publishes, with the channels claims hold.
	Domains []Domain `json:"nvlinkDomains,omitempty"`
	// Notes say what the view could not know.
	Notes []string `json:"notes,omitempty"`
}

// Domain is one NVLink domain's channel pool.
type Domain struct {
	Name string `json:"name"`
	// Nodes are the nodes whose GPUs publish the domain.
	Nodes []string `json:"nodes"`
	// Channels is how many channels the pool publishes (channel-0, the
	// shared one, included).
	Channels int `json:"channels"`
	// Held are the channels claims hold, by channel.
	Held []HeldChannel `json:"held,omitempty"`
	// IMEXNotReady are the nodes whose plugin says their IMEX daemon is
	// not ready (imexReady false): new pods holding a channel stay off
	// them.
	IMEXNotReady []string `json:"imexNotReady,omitempty"`
}

// HeldChannel is a channel and a claim that holds it (channel-0 may be
// held by several).
type HeldChannel struct {
	Channel string `json:"channel"`
	Holder
}

// Node is one node's pool.
type Node struct {
	Name string `json:"name"`
	GPUs []GPU  `json:"gpus"`
	Free Free   `json:"free"`
	// NVLinkDomain is the multi-node NVLink domain its GPUs publish
	// (nvlinkDomain); empty for a node in none.
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// IMEXDaemon is what its GPUs say of the node's IMEX daemon
	// (imexReady): "ready", "not ready", or empty where the plugin does
	// not ask.
	IMEXDaemon string `json:"imexDaemon,omitempty"`
}

// IMEX daemon states of Node.IMEXDaemon.
const (
	IMEXReady    = "ready"
	IMEXNotReady = "not ready"
)

// Free is what a node can give right now.
type Free struct {
	// GPUs is the number of whole GPUs free (untainted, nothing held).
	GPUs int `json:"gpus"`
	// Partitions is how many more MIG partitions of each profile the
	// node's GPUs could take, one profile at a time (a GPU that takes a
	// 7g.80gb takes no 1g.10gb besides).
	Partitions map[string]int `json:"partitions,omitempty"`
	// SharedMemory is the memory left on GPUs shared by claims that each
	// hold a share (consumable capacity).
	SharedMemory *resource.Quantity `json:"sharedMemory,omitempty"`
}

// GPU states.
const (
	StateFree        = "free"
	StateWhole       = "whole"       // one claim holds the GPU
	StateShared      = "shared"      // claims hold shares of it
	StatePartitioned = "partitioned" // claims hold MIG partitions of it
	StateUnpublished = "unpublished" // neither the GPU nor a partition is offered (e.g. an admin's MIG instances)
)

// GPU is one physical GPU.
type GPU struct {
	Device       string `json:"device"` // gpu-<minor>
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// IMEXReady is the GPU's imexReady attribute, nil without it.
	IMEXReady *bool              `json:"-"`
	Minor     int                `json:"minor"`
	UUID      string             `json:"uuid,omitempty"`
	Model     string             `json:"model,omitempty"`
	PCIBusID  string             `json:"pciBusID,omitempty"`
	Memory    *resource.Quantity `json:"memory,omitempty"`
	Healthy   bool               `json:"healthy"`
	Taints    []string           `json:"taints,omitempty"` // key=value:effect
	State     string             `json:"state"`
	// Available says a claim for a whole GPU could get it now: published,
	// nothing held, no NoSchedule taint.
	Available  bool               `json:"available"`
	Shareable  bool               `json:"shareable,omitempty"`
	FreeMemory *resource.Quantity `json:"freeMemory,omitempty"` // shareable GPUs
	Holders    []Holder           `json:"holders,omitempty"`    // the whole GPU or its shares
	Partitions []Partition        `json:"partitions,omitempty"` // allocated MIG partitions
	Monitors   []Holder           `json:"monitors,omitempty"`   // admin-access (monitoring) claims
	// Room is how many more MIG partitions of each profile the GPU could
	// take, one profile at a time.
	Room map[string]int `json:"room,omitempty"`
}

// Partition is an allocated MIG partition.
type Partition struct {
	Device         string `json:"device"`
	Profile        string `json:"profile"`
	PlacementStart int    `json:"placementStart"`
	PlacementSize  int    `json:"placementSize"`
	Holder         Holder `json:"holder"`
}

// Holder is a claim holding a device (or a share of one).
type Holder struct {
	Namespace string `json:"namespace,omitempty"`
	Claim     string `json:"claim,omitempty"`
	// Hidden is set for a claim outside Report.Namespace.
	Hidden  bool     `json:"hidden,omitempty"`
	Request string   `json:"request,omitempty"`
	Pods    []string `json:"pods,omitempty"`
	ShareID string   `json:"shareID,omitempty"`
	// Memory is the share's memory (consumable capacity).
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Prepared is set once the plugin reported the device in the claim's
	// status.devices with Ready true; Status is what it reported.
	Prepared bool                    `json:"prepared"`
	Status   *configapi.DeviceStatus `json:"status,omitempty"`
}

// Name is "namespace/claim".
func (h Holder) Name() string {
	if h.Hidden {
		return "(another namespace)"
	}
	return h.Namespace + "/" + h.Claim
}

// Options select what the report shows.
type Options struct {
	Driver string
	// Namespace shows only this namespace's claims by name.
	Namespace string
	// Nodes, when set, limits the report to these nodes.
	Nodes []string
}

// deviceKey names a device in a pool.
type deviceKey struct{ pool, device string }

// published is one device as the newest slices of its pool publish it.
type published struct {
	node string
	dev  resourceapi.Device
}

// Build makes the report from the driver's ResourceSlices and the
// cluster's ResourceClaims.
func Build(resourceSlices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, o Options) *Report {
	rep := &Report{Driver: o.Driver, Namespace: o.Namespace}
	devices, pools, counters := publishedDevices(resourceSlices, o.Driver)
	held := allocations(claims, o.Driver, o.Namespace)

	// The GPUs of each pool, by minor: from whole and monitoring devices,
	// MIG placements and allocations (a device held but no longer
	// published still says which GPU it is on).
	type gpuKey struct {
		pool  string
		minor int
	}
	gpus := map[gpuKey]*GPU{}
	nodeOf := map[string]string{}
	get := func(pool string, minor int) *GPU {
		k := gpuKey{pool, minor}
		if g, ok := gpus[k]; ok {
			return g
		}
		g := &GPU{Device: gpu.WholeDeviceName(minor), Minor: minor, Healthy: true, State: StateFree}
		gpus[k] = g
		return g
	}
	for k, p := range devices {
		n, ok := gpu.ParseDeviceName(k.device)
		if !ok {
			continue
		}
		nodeOf[k.pool] = p.node
		g := get(k.pool, n.Minor)
		if !n.MIG && (g.UUID == "" || !n.Monitor) {
			describe(g, p.dev)
		}
	}
	for k := range held {
		if n, ok := gpu.ParseDeviceName(k.device); ok {
			get(k.pool, n.Minor)
			if _, known := nodeOf[k.pool]; !known {
				nodeOf[k.pool] = k.pool
			}
		}
	}

	healthKey := slicebuilder.UnhealthyTaintKey(o.Driver)
	monitorKey := slicebuilder.MonitoringTaintKey(o.Driver)
	for k, g := range gpus {
		whole := deviceKey{k.pool, g.Device}
		wholeDev, wholePublished := devices[whole]
		var blocked bool // a NoSchedule taint keeps new claims off
		addTaints := func(d resourceapi.Device) {
			for _, t := range d.Taints {
				if t.Key == monitorKey {
					continue
				}
				s := t.Key + "=" + t.Value + ":" + string(t.Effect)
				if !slices.Contains(g.Taints, s) {
					g.Taints = append(g.Taints, s)
				}
				if t.Key == healthKey {
					g.Healthy = false
				}
				if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
					blocked = true
				}
			}
		}
		if wholePublished {
			addTaints(wholeDev.dev)
			g.Shareable = wholeDev.dev.AllowMultipleAllocations != nil && *wholeDev.dev.AllowMultipleAllocations
		}
		// MIG placements of this GPU, published or held.
		var placements []published
		for dk, p := range devices {
			if n, ok := gpu.ParseDeviceName(dk.device); ok && dk.pool == k.pool && n.Minor == g.Minor && n.MIG {
				placements = append(placements, p)
				addTaints(p.dev)
			}
		}
		// Who holds what.
		for _, h := range held[whole] {
			if h.admin {
				g.Monitors = append(g.Monitors, h.Holder)
			} else {
				g.Holders = append(g.Holders, h.Holder)
			}
		}
		for _, h := range held[deviceKey{k.pool, gpu.MonitorDeviceName(g.Minor)}] {
			g.Monitors = append(g.Monitors, h.Holder)
		}
		var taken []span
		for dk, hs := range held {
			n, ok := gpu.ParseDeviceName(dk.device)
			if !ok || dk.pool != k.pool || n.Minor != g.Minor || !n.MIG {
				continue
			}
			part := Partition{Device: dk.device, PlacementStart: n.Start, PlacementSize: 1}
			if p, ok := devices[dk]; ok {
				part.Profile = stringAttr(p.dev, slicebuilder.AttrProfile)
				if _, size, ok := slicebuilder.Placement(p.dev); ok && size > 0 {
					part.PlacementSize = size
				}
			}
			for _, h := range hs {
				if h.Status != nil && h.Status.MIG != nil {
					part.Profile, part.PlacementSize = h.Status.MIG.Profile, h.Status.MIG.PlacementSize
				}
				if h.admin {
					g.Monitors = append(g.Monitors, h.Holder)
					continue
				}
				p := part
				p.Holder = h.Holder
				g.Partitions = append(g.Partitions, p)
				taken = append(taken, span{part.PlacementStart, part.PlacementSize})
			}
		}
		switch {
		case len(g.Partitions) > 0:
			g.State = StatePartitioned
		case len(g.Holders) > 0 && g.Shareable:
			g.State = StateShared
		case len(g.Holders) > 0:
			g.State = StateWhole
		case !wholePublished && len(placements) == 0:
			g.State = StateUnpublished
		}
		// What is free on it.
		g.Available = g.State == StateFree && wholePublished && !blocked
		if g.Shareable && g.Memory != nil && (g.State == StateShared || g.State == StateFree) {
			left := g.Memory.DeepCopy()
			for _, h := range g.Holders {
				if h.Memory != nil {
					left.Sub(*h.Memory)
				}
			}
			g.FreeMemory = &left
		}
		if (g.State == StateFree || g.State == StatePartitioned) && !(wholePublished && hasNoSchedule(wholeDev.dev)) {
			var heldDevs []resourceapi.Device
			for _, p := range g.Partitions {
				if d, ok := devices[deviceKey{k.pool, p.Device}]; ok {
					heldDevs = append(heldDevs, d.dev)
				}
			}
			isHeld := func(name string) bool { return len(held[deviceKey{k.pool, name}]) > 0 }
			g.Room = room(placements, isHeld, heldDevs, taken, counters[k.pool])
		}
		sort.Slice(g.Taints, func(i, j int) bool { return g.Taints[i] < g.Taints[j] })
		sortHolders(g.Holders)
		sortHolders(g.Monitors)
		slices.SortFunc(g.Partitions, func(a, b Partition) int { return cmp.Compare(a.PlacementStart, b.PlacementStart) })
	}

	byNode := map[string]*Node{}
	for k, g := range gpus {
		node := cmp.Or(nodeOf[k.pool], k.pool)
		if len(o.Nodes) > 0 && !slices.Contains(o.Nodes, node) {
			continue
		}
		n := byNode[node]
		if n == nil {
			n = &Node{Name: node}
			byNode[node] = n
		}
		n.GPUs = append(n.GPUs, *g)
	}
	for _, pool := range pools {
		if strings.HasPrefix(pool, slicebuilder.ChannelPoolPrefix) {
			continue // a domain's, not a node's: in rep.Domains
		}
		node := cmp.Or(nodeOf[pool], pool)
		if _, ok := byNode[node]; !ok && (len(o.Nodes) == 0 || slices.Contains(o.Nodes, node)) {
			byNode[node] = &Node{Name: node} // a pool without GPUs
		}
	}
	for _, n := range byNode {
		slices.SortFunc(n.GPUs, func(a, b GPU) int { return cmp.Compare(a.Minor, b.Minor) })
		var shared resource.Quantity
		hasShared := false
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if g.Available {
				n.Free.GPUs++
			}
			n.NVLinkDomain = cmp.Or(n.NVLinkDomain, g.NVLinkDomain)
			if g.IMEXReady != nil {
				// One GPU that says not ready makes the node not ready,
				// as gpudra-controller reads it.
				if !*g.IMEXReady {
					n.IMEXDaemon = IMEXNotReady
				} else if n.IMEXDaemon == "" {
					n.IMEXDaemon = IMEXReady
				}
			}
			for p, c := range g.Room {
				if n.Free.Partitions == nil {
					n.Free.Partitions = map[string]int{}
				}
				n.Free.Partitions[p] += c
			}
			if g.FreeMemory != nil && g.State == StateShared {
				shared.Add(*g.FreeMemory)
				hasShared = true
			}
		}
		if hasShared {
			n.Free.SharedMemory = &shared
		}
		rep.Nodes = append(rep.Nodes, *n)
	}
	slices.SortFunc(rep.Nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	rep.Domains = domains(rep.Nodes, devices, pools, held)
	return rep
}

// domains are the channel pools among the pools, with the nodes of each
// domain and the channels claims hold.
func domains(nodes []Node, devices map[deviceKey]published, pools []string, held map[deviceKey][]heldDevice) []Domain {
	var out []Domain
	for _, pool := range pools {
		name, ok := strings.CutPrefix(pool, slicebuilder.ChannelPoolPrefix)
		if !ok {
			continue
		}
		d := Domain{Name: name}
		for _, n := range nodes {
			if n.NVLinkDomain == name {
				d.Nodes = append(d.Nodes, n.Name)
				if n.IMEXDaemon == IMEXNotReady {
					d.IMEXNotReady = append(d.IMEXNotReady, n.Name)
				}
			}
		}
		for k := range devices {
			if k.pool == pool {
				d.Channels++
			}
		}
		for k, hs := range held {
			if k.pool != pool {
				continue
			}
			for _, h := range hs {
				d.Held = append(d.Held, HeldChannel{Channel: k.device, Holder: h.Holder})
			}
		}
		slices.SortFunc(d.Held, func(a, b HeldChannel) int {
			na, _ := gpu.ParseChannelDeviceName(a.Channel)
			nb, _ := gpu.ParseChannelDeviceName(b.Channel)
			return cmp.Or(cmp.Compare(na, nb), cmp.Compare(a.Namespace+"/"+a.Claim, b.Namespace+"/"+b.Claim))
		})
		out = append(out, d)
	}
	return out
}

// heldDevice is a claim's hold on one device.
type heldDevice struct {
	Holder
	admin bool
}

// publishedDevices indexes the driver's devices in the newest generation
// of each pool (the scheduler ignores older ones), and lists the pools.
func publishedDevices(sl []resourceapi.ResourceSlice, driver string) (map[deviceKey]published, []string, map[string]map[string]map[string]resource.Quantity) {
	newest := map[string]int64{}
	for _, s := range sl {
		if s.Spec.Driver != driver {
			continue
		}
		if g, ok := newest[s.Spec.Pool.Name]; !ok || s.Spec.Pool.Generation > g {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	out := map[deviceKey]published{}
	counters := map[string]map[string]map[string]resource.Quantity{} // pool, counter set, counter
	for _, s := range sl {
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, cs := range s.Spec.SharedCounters {
			if counters[s.Spec.Pool.Name] == nil {
				counters[s.Spec.Pool.Name] = map[string]map[string]resource.Quantity{}
			}
			set := map[string]resource.Quantity{}
			for name, c := range cs.Counters {
				set[name] = c.Value.DeepCopy()
			}
			counters[s.Spec.Pool.Name][cs.Name] = set
		}
		node := s.Spec.Pool.Name
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			node = *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			out[deviceKey{s.Spec.Pool.Name, d.Name}] = published{node: node, dev: d}
		}
	}
	pools := make([]string, 0, len(newest))
	for p := range newest {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	return out, pools, counters
}

// span is a MIG placement's memory slices.
type span struct{ start, size int }

func (a span) overlaps(b span) bool { return a.start < b.start+b.size && b.start < a.start+a.size }

// room counts, per profile, how many more partitions of that profile the
// GPU could take: its published placements that no claim holds and no
// NoSchedule taint blocks, given out by start as long as what is left of
// the counters (the GPU's counter sets less what the held partitions
// consume) allows, and none overlapping a held partition.
func room(placements []published, isHeld func(string) bool, heldDevs []resourceapi.Device, taken []span, sets map[string]map[string]resource.Quantity) map[string]int {
	left := map[string]map[string]resource.Quantity{}
	for name, set := range sets {
		c := map[string]resource.Quantity{}
		for k, v := range set {
			c[k] = v.DeepCopy()
		}
		left[name] = c
	}
	consume(left, heldDevs)
	byProfile := map[string][]resourceapi.Device{}
	for _, p := range placements {
		if isHeld(p.dev.Name) || hasNoSchedule(p.dev) {
			continue
		}
		prof := stringAttr(p.dev, slicebuilder.AttrProfile)
		byProfile[prof] = append(byProfile[prof], p.dev)
	}
	var out map[string]int
	for prof, devs := range byProfile {
		slices.SortFunc(devs, func(a, b resourceapi.Device) int {
			sa, _, _ := slicebuilder.Placement(a)
			sb, _, _ := slicebuilder.Placement(b)
			return cmp.Compare(sa, sb)
		})
		rem := map[string]map[string]resource.Quantity{}
		for name, set := range left {
			c := map[string]resource.Quantity{}
			for k, v := range set {
				c[k] = v.DeepCopy()
			}
			rem[name] = c
		}
		used := slices.Clone(taken)
		n := 0
		for _, d := range devs {
			start, size, _ := slicebuilder.Placement(d)
			sp := span{start, max(size, 1)}
			if slices.ContainsFunc(used, sp.overlaps) || !fits(rem, d) {
				continue
			}
			consume(rem, []resourceapi.Device{d})
			used = append(used, sp)
			n++
		}
		if n > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[prof] = n
		}
	}
	return out
}

// fits says whether what d consumes is left.
func fits(left map[string]map[string]resource.Quantity, d resourceapi.Device) bool {
	for _, c := range d.ConsumesCounters {
		set, ok := left[c.CounterSet]
		if !ok {
			continue // a counter set not published: the overlap check decides
		}
		for name, want := range c.Counters {
			if have, ok := set[name]; !ok || have.Cmp(want.Value) < 0 {
				return false
			}
		}
	}
	return true
}

func consume(left map[string]map[string]resource.Quantity, devs []resourceapi.Device) {
	for _, d := range devs {
		for _, c := range d.ConsumesCounters {
			set, ok := left[c.CounterSet]
			if !ok {
				continue
			}
			for name, want := range c.Counters {
				if have, ok := set[name]; ok {
					have.Sub(want.Value)
					set[name] = have
				}
			}
		}
	}
}

// allocations are the devices of the driver that claims hold, with the
// status the plugin reported for each.
func allocations(claims []resourceapi.ResourceClaim, driver, namespace string) map[deviceKey][]heldDevice {
	out := map[deviceKey][]heldDevice{}
	for _, c := range claims {
		alloc := c.Status.Allocation
		if alloc == nil {
			continue
		}
		var pods []string
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.APIGroup == "" {
				pods = append(pods, r.Name)
			}
		}
		sort.Strings(pods)
		hidden := namespace != "" && c.Namespace != namespace
		for _, r := range alloc.Devices.Results {
			if r.Driver != driver {
				continue
			}
			h := heldDevice{Holder: Holder{Namespace: c.Namespace, Claim: c.Name, Request: r.Request, Pods: pods, Hidden: hidden},
				admin: r.AdminAccess != nil && *r.AdminAccess}
			if r.ShareID != nil {
				h.ShareID = string(*r.ShareID)
			}
			if q, ok := r.ConsumedCapacity[slicebuilder.CapMemory]; ok {
				q := q.DeepCopy()
				h.Memory = &q
			}
			for _, st := range c.Status.Devices {
				if st.Driver != driver || st.Pool != r.Pool || st.Device != r.Device || ptrString(st.ShareID) != h.ShareID {
					continue
				}
				for _, cond := range st.Conditions {
					if cond.Type == "Ready" && cond.Status == "True" {
						h.Prepared = true
					}
				}
				if st.Data != nil {
					if ds, err := configapi.DecodeDeviceStatus(st.Data.Raw); err == nil {
						h.Status = ds
					}
				}
			}
			if hidden {
				h.Holder = Holder{Hidden: true, ShareID: h.ShareID, Memory: h.Memory, Prepared: h.Prepared}
			}
			k := deviceKey{r.Pool, r.Device}
			out[k] = append(out[k], h)
		}
	}
	return out
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describe fills in what a whole GPU's (or its monitoring device's)
// attributes say.
func describe(g *GPU, d resourceapi.Device) {
	g.UUID = stringAttr(d, slicebuilder.AttrUUID)
	g.Model = stringAttr(d, slicebuilder.AttrProductName)
	g.PCIBusID = stringAttr(d, slicebuilder.AttrPCIBusID)
	g.NVLinkDomain = stringAttr(d, slicebuilder.AttrNVLinkDomain)
	if a, ok := d.Attributes[slicebuilder.AttrIMEXReady]; ok && a.BoolValue != nil {
		g.IMEXReady = ptr.To(*a.BoolValue)
	}
	if c, ok := d.Capacity[slicebuilder.CapMemory]; ok {
		q := c.Value.DeepCopy()
		g.Memory = &q
	}
}

func stringAttr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func hasNoSchedule(d resourceapi.Device) bool {
	for _, t := range d.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}

func sortHolders(hs []Holder) {
	slices.SortFunc(hs, func(a, b Holder) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Claim, b.Claim), cmp.Compare(a.ShareID, b.ShareID))
	})
}

// Summary is one line per node of what is free, e.g. "6 whole GPUs; or
// MIG partitions of one profile: 1g.10gb 42, 7g.80gb 6; 40Gi on shared
// GPUs".
func (f Free) Summary() string {
	parts := []string{plural(f.GPUs, "whole GPU")}
	if len(f.Partitions) > 0 {
		profiles := make([]string, 0, len(f.Partitions))
		for p := range f.Partitions {
			profiles = append(profiles, p)
		}
		slices.SortFunc(profiles, compareProfiles)
		var ps []string
		for _, p := range profiles {
			ps = append(ps, p+" "+strconv.Itoa(f.Partitions[p]))
		}
		parts = append(parts, "or MIG partitions of one profile: "+strings.Join(ps, ", "))
	}
	if f.SharedMemory != nil {
		parts = append(parts, f.SharedMemory.String()+" on shared GPUs")
	}
	return strings.Join(parts, "; ")
}

// compareProfiles orders MIG profile names by compute slices, then memory,
// then name: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, …, 7g.80gb.
func compareProfiles(a, b string) int {
	num := func(s, unit string) int {
		i := strings.Index(s, unit)
		if i <= 0 {
			return 0
		}
		j := i
		for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
			j--
		}
		n, _ := strconv.Atoi(s[j:i])
		return n
	}
	return cmp.Or(cmp.Compare(num(a, "g."), num(b, "g.")), cmp.Compare(num(a, "gb"), num(b, "gb")), cmp.Compare(a, b))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
