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

package clusterstatus

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Build makes the report from the driver's ResourceSlices and the
// cluster's ResourceClaims.
func Build(resourceSlices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, o Options) *Report {
	b := newBuilder(resourceSlices, claims, o)
	gpus, nodeOf := b.gpus()
	for k, g := range gpus {
		b.fillGPU(k, g)
	}
	rep := &Report{Driver: o.Driver, Namespace: o.Namespace}
	for _, n := range b.nodes(gpus, nodeOf) {
		summarizeNode(n)
		rep.Nodes = append(rep.Nodes, *n)
	}
	slices.SortFunc(rep.Nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	rep.Domains = domains(rep.Nodes, b.devices, b.pools, b.held)
	return rep
}

// builder is what Build reads, indexed by device, and the taint keys the
// driver's plugin sets.
type builder struct {
	o       Options
	devices map[deviceKey]published
	pools   []string
	// counters are the published counter sets: pool, counter set, counter.
	counters map[string]map[string]map[string]resource.Quantity
	held     map[deviceKey][]heldDevice
	// healthKey marks an unhealthy GPU; monitorKey is the monitoring
	// device's taint, not shown.
	healthKey, monitorKey string
}

func newBuilder(resourceSlices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, o Options) *builder {
	b := &builder{
		o:          o,
		held:       allocations(claims, o.Driver, o.Namespace),
		healthKey:  slicebuilder.UnhealthyTaintKey(o.Driver),
		monitorKey: slicebuilder.MonitoringTaintKey(o.Driver),
	}
	b.devices, b.pools, b.counters = publishedDevices(resourceSlices, o.Driver)
	return b
}

// gpuKey names a GPU: its pool and minor.
type gpuKey struct {
	pool  string
	minor int
}

// gpus are the GPUs of each pool, by minor: from whole and monitoring
// devices, MIG placements and allocations (a device held but no longer
// published still says which GPU it is on), and the node of each pool.
func (b *builder) gpus() (map[gpuKey]*GPU, map[string]string) {
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
	for k, p := range b.devices {
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
	for k := range b.held {
		if n, ok := gpu.ParseDeviceName(k.device); ok {
			get(k.pool, n.Minor)
			if _, known := nodeOf[k.pool]; !known {
				nodeOf[k.pool] = k.pool
			}
		}
	}
	return gpus, nodeOf
}

// gpuFacts are what fillGPU learns about one GPU on the way to its state
// and what is free on it.
type gpuFacts struct {
	key gpuKey
	// whole is the whole GPU's device, if wholePublished.
	whole          published
	wholePublished bool
	// placements are its MIG placements, published or held.
	placements []published
	// blocked: a NoSchedule or NoExecute taint keeps new claims off.
	blocked bool
	// taken are the placements held partitions use.
	taken []span
}

// fillGPU fills in one GPU: its taints, who holds it or its partitions,
// its state, and what is free on it.
func (b *builder) fillGPU(k gpuKey, g *GPU) {
	f := gpuFacts{key: k}
	f.whole, f.wholePublished = b.devices[deviceKey{k.pool, g.Device}]
	if f.wholePublished {
		f.blocked = b.addTaints(g, f.whole.dev)
		g.Shareable = f.whole.dev.AllowMultipleAllocations != nil && *f.whole.dev.AllowMultipleAllocations
	}
	for dk, p := range b.devices {
		if n, ok := gpu.ParseDeviceName(dk.device); ok && dk.pool == k.pool && n.Minor == g.Minor && n.MIG {
			f.placements = append(f.placements, p)
			if b.addTaints(g, p.dev) {
				f.blocked = true
			}
		}
	}
	b.addHolders(k, g)
	f.taken = b.addPartitions(k, g)
	setState(g, f)
	b.fillFree(g, f)
	sort.Slice(g.Taints, func(i, j int) bool { return g.Taints[i] < g.Taints[j] })
	sortHolders(g.Holders)
	sortHolders(g.Monitors)
	slices.SortFunc(g.Partitions, func(a, b Partition) int { return cmp.Compare(a.PlacementStart, b.PlacementStart) })
}

// addTaints adds a device's taints to its GPU's (but the monitoring
// device's own, which only keeps ordinary claims off it), marks the GPU
// unhealthy when the plugin says so, and reports whether a taint keeps
// new claims off.
func (b *builder) addTaints(g *GPU, d resourceapi.Device) (blocked bool) {
	for _, t := range d.Taints {
		if t.Key == b.monitorKey {
			continue
		}
		s := t.Key + "=" + t.Value + ":" + string(t.Effect)
		if !slices.Contains(g.Taints, s) {
			g.Taints = append(g.Taints, s)
		}
		if t.Key == b.healthKey {
			g.Healthy = false
		}
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			blocked = true
		}
	}
	return blocked
}

// addHolders lists the claims holding the whole GPU (with admin access:
// monitors) and its monitoring device.
func (b *builder) addHolders(k gpuKey, g *GPU) {
	for _, h := range b.held[deviceKey{k.pool, g.Device}] {
		if h.admin {
			g.Monitors = append(g.Monitors, h.Holder)
		} else {
			g.Holders = append(g.Holders, h.Holder)
		}
	}
	for _, h := range b.held[deviceKey{k.pool, gpu.MonitorDeviceName(g.Minor)}] {
		g.Monitors = append(g.Monitors, h.Holder)
	}
}

// addPartitions lists the GPU's held MIG partitions, each with its
// profile and placement (the plugin's status says them best, then the
// published device, then the name), and returns the placements they take.
func (b *builder) addPartitions(k gpuKey, g *GPU) (taken []span) {
	for dk, hs := range b.held {
		n, ok := gpu.ParseDeviceName(dk.device)
		if !ok || dk.pool != k.pool || n.Minor != g.Minor || !n.MIG {
			continue
		}
		part := Partition{Device: dk.device, PlacementStart: n.Start, PlacementSize: 1}
		if p, ok := b.devices[dk]; ok {
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
	return taken
}

// setState says how the GPU is used; a GPU nothing holds stays free.
func setState(g *GPU, f gpuFacts) {
	switch {
	case len(g.Partitions) > 0:
		g.State = StatePartitioned
	case len(g.Holders) > 0 && g.Shareable:
		g.State = StateShared
	case len(g.Holders) > 0:
		g.State = StateWhole
	case !f.wholePublished && len(f.placements) == 0:
		g.State = StateUnpublished
	}
}

// fillFree says what is free on the GPU: itself, memory of a shared GPU,
// room for more MIG partitions.
func (b *builder) fillFree(g *GPU, f gpuFacts) {
	g.Available = g.State == StateFree && f.wholePublished && !f.blocked
	if g.Shareable && g.Memory != nil && (g.State == StateShared || g.State == StateFree) {
		left := g.Memory.DeepCopy()
		for _, h := range g.Holders {
			if h.Memory != nil {
				left.Sub(*h.Memory)
			}
		}
		g.FreeMemory = &left
	}
	if (g.State == StateFree || g.State == StatePartitioned) && !(f.wholePublished && hasNoSchedule(f.whole.dev)) {
		var heldDevs []resourceapi.Device
		for _, p := range g.Partitions {
			if d, ok := b.devices[deviceKey{f.key.pool, p.Device}]; ok {
				heldDevs = append(heldDevs, d.dev)
			}
		}
		isHeld := func(name string) bool { return len(b.held[deviceKey{f.key.pool, name}]) > 0 }
		g.Room = room(f.placements, isHeld, heldDevs, f.taken, b.counters[f.key.pool])
	}
}

// nodes groups the GPUs by node, limited to the nodes asked for; pools
// without GPUs are nodes too, but channel pools are a domain's.
func (b *builder) nodes(gpus map[gpuKey]*GPU, nodeOf map[string]string) map[string]*Node {
	byNode := map[string]*Node{}
	for k, g := range gpus {
		node := cmp.Or(nodeOf[k.pool], k.pool)
		if len(b.o.Nodes) > 0 && !slices.Contains(b.o.Nodes, node) {
			continue
		}
		n := byNode[node]
		if n == nil {
			n = &Node{Name: node}
			byNode[node] = n
		}
		n.GPUs = append(n.GPUs, *g)
	}
	for _, pool := range b.pools {
		if strings.HasPrefix(pool, slicebuilder.ChannelPoolPrefix) {
			continue // a domain's, not a node's: in rep.Domains
		}
		node := cmp.Or(nodeOf[pool], pool)
		if _, ok := byNode[node]; !ok && (len(b.o.Nodes) == 0 || slices.Contains(b.o.Nodes, node)) {
			byNode[node] = &Node{Name: node} // a pool without GPUs
		}
	}
	return byNode
}

// summarizeNode sorts the node's GPUs and adds up what is free on them,
// its NVLink domain and its IMEX daemon's readiness.
func summarizeNode(n *Node) {
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

func sortHolders(hs []Holder) {
	slices.SortFunc(hs, func(a, b Holder) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Claim, b.Claim), cmp.Compare(a.ShareID, b.ShareID))
	})
}
