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

package spareedit

import (
	"context"
	"slices"
	"sort"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Republisher says what nodes publish once claims are prepared on them,
// for slices that no profile describes (read from files or a cluster),
// by editing the slices they publish now, as gpudra's plugin republishes
// after each prepare (slicebuilder's readyGPUs): a free GPU that
// publishes its placements (a spare) stays a spare, a spare that a claim
// partitions or holds whole is replaced by the highest free
// partitionable GPU that publishes none, whose placements are copied
// from a GPU of the same model that publishes them (the node's own
// first, else the first anywhere in the slices; WithSpare), and a GPU
// held whole hides its placements. How many spares a node keeps is how
// many it publishes before the claims check allocates: the plugin's
// --mig-spare-gpus is not in its slices. Where no GPU of the model
// publishes placements, nothing is refilled. fakenodes.Republisher does
// the same for fake nodes by running the slice builder. It is safe for
// concurrent use.
type Republisher struct {
	driver string
	byNode map[string][]*resourceapi.ResourceSlice
	nodes  []string // sorted
	held   map[gpuKey]gpu.Use

	mu        sync.Mutex
	gpus      map[string][]nodeGPU // by node, once read
	templates map[string]*Template // by model; nil for one no GPU publishes placements of
}

// gpuKey is a GPU by pool and minor.
type gpuKey struct {
	pool  string
	minor int
}

// nodeGPU is a whole GPU of a node as its slices publish it.
type nodeGPU struct {
	GPU
	minor int
	model string
	// capable: it can take a spare (migCapable, not Ampere, whose MIG
	// mode changes only with a reset, in a pool that publishes MIG).
	capable bool
	tainted bool
	// published: its placements are published.
	published bool
}

// NewRepublisher returns a Republisher over all nodes' slices (those
// with spec.nodeName; the driver's are edited, the others kept), held
// being the devices that claims hold already, whose slices reflect
// them (a cluster's allocated claims).
func NewRepublisher(driver string, all []*resourceapi.ResourceSlice, held []resourceapi.DeviceRequestAllocationResult) *Republisher {
	r := &Republisher{driver: driver, byNode: map[string][]*resourceapi.ResourceSlice{}, gpus: map[string][]nodeGPU{}, templates: map[string]*Template{}}
	for _, s := range all {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		n := *s.Spec.NodeName
		if _, ok := r.byNode[n]; !ok {
			r.nodes = append(r.nodes, n)
		}
		r.byNode[n] = append(r.byNode[n], s)
	}
	sort.Strings(r.nodes)
	r.held = r.uses(nil, held)
	return r
}

// Slices returns the slices node publishes once the claims in prepared
// (one entry per claim, in the order they were prepared, each the
// devices it holds) are prepared. Results of other drivers and
// admin-access results hold nothing, as on the plugin.
func (r *Republisher) Slices(_ context.Context, node string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	out, _ := r.publish(node, prepared, 0)
	return out, nil
}

// SparedSlices is Slices once gpudra-controller gave the node one more
// spare (--mig-spare-gpus=fleet), as the controller's spare fit edits
// them (internal/fleet): nil when the node has no free GPU that could
// take one, or no GPU of its model publishes placements.
func (r *Republisher) SparedSlices(_ context.Context, node string, prepared [][]resourceapi.DeviceRequestAllocationResult) ([]*resourceapi.ResourceSlice, error) {
	out, ok := r.publish(node, prepared, 1)
	if !ok {
		return nil, nil
	}
	return out, nil
}

// publish is what node publishes once prepared are, with extra spares
// more than it keeps; ok says whether the extra ones were found.
func (r *Republisher) publish(node string, prepared [][]resourceapi.DeviceRequestAllocationResult, extra int) ([]*resourceapi.ResourceSlice, bool) {
	out := r.byNode[node]
	if len(prepared) == 0 && extra == 0 {
		return out, true
	}
	var results []resourceapi.DeviceRequestAllocationResult
	for _, c := range prepared {
		results = append(results, c...)
	}
	after := r.uses(r.held, results)
	gpus := slices.Clone(r.nodeGPUs(node))
	free := func(g nodeGPU, uses map[gpuKey]gpu.Use) bool {
		return uses[gpuKey{g.Pool, g.minor}] == gpu.Unused && !g.tainted
	}
	// The spares the node keeps: its free GPUs that publish placements
	// before check's claims.
	target, spares := extra, 0
	for i, g := range gpus {
		if !g.published {
			continue
		}
		if free(g, r.held) {
			target++
		}
		switch {
		case after[gpuKey{g.Pool, g.minor}] == gpu.UsedWhole && r.held[gpuKey{g.Pool, g.minor}] != gpu.UsedWhole:
			out = withoutPlacements(out, g)
			gpus[i].published = false
		case free(g, after):
			spares++
		}
	}
	// A GPU that a claim partitions publishes its placements: one made
	// a spare by an earlier claim's refill, then partitioned.
	for i, g := range gpus {
		if g.published || !g.capable || g.tainted || after[gpuKey{g.Pool, g.minor}] != gpu.UsedByMIG {
			continue
		}
		if t := r.template(node, g.model); t != nil {
			out = WithSpare(out, g.GPU, t)
			gpus[i].published = true
		}
	}
	// Free GPUs from the highest minor down, as the plugin picks them.
	for i := len(gpus) - 1; i >= 0 && spares < target; i-- {
		g := gpus[i]
		if g.published || !g.capable || !free(g, after) {
			continue
		}
		t := r.template(node, g.model)
		if t == nil {
			continue
		}
		out = WithSpare(out, g.GPU, t)
		gpus[i].published = true
		spares++
	}
	return out, spares >= target
}

// uses adds to base (not changed) how the results hold the driver's
// GPUs, as the plugin's node state says once their claims are prepared.
func (r *Republisher) uses(base map[gpuKey]gpu.Use, results []resourceapi.DeviceRequestAllocationResult) map[gpuKey]gpu.Use {
	out := make(map[gpuKey]gpu.Use, len(base)+len(results))
	for k, v := range base {
		out[k] = v
	}
	for _, d := range results {
		if d.Driver != r.driver || (d.AdminAccess != nil && *d.AdminAccess) {
			continue
		}
		name, ok := gpu.ParseDeviceName(d.Device)
		k := gpuKey{d.Pool, name.Minor}
		switch {
		case !ok || name.Monitor:
		case name.MIG:
			if out[k] != gpu.UsedWhole {
				out[k] = gpu.UsedByMIG
			}
		default:
			out[k] = gpu.UsedWhole
		}
	}
	return out
}

// nodeGPUs reads the node's whole GPUs from its slices, in minor order.
func (r *Republisher) nodeGPUs(node string) []nodeGPU {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodeGPUsLocked(node)
}

func (r *Republisher) nodeGPUsLocked(node string) []nodeGPU {
	if gs, ok := r.gpus[node]; ok {
		return gs
	}
	published, migSlots := map[string]bool{}, map[string]bool{}
	for _, s := range r.byNode[node] {
		if s.Spec.Driver != r.driver {
			continue
		}
		// slicebuilder keeps the counter sets and placements of GPUs
		// that publish none in slices of their own, empty; a pool that
		// publishes no MIG has none (as internal/fleet reads it).
		if len(s.Spec.Devices) == 0 || len(s.Spec.SharedCounters) > 0 {
			migSlots[s.Spec.Pool.Name] = true
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if attr(d, slicebuilder.AttrType) == slicebuilder.TypeMIG {
				published[attr(d, slicebuilder.AttrParentUUID)] = true
			}
		}
	}
	var out []nodeGPU
	for _, s := range r.byNode[node] {
		if s.Spec.Driver != r.driver {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			name, ok := gpu.ParseDeviceName(d.Name)
			if !ok || name.MIG || name.Monitor || attr(d, slicebuilder.AttrType) != slicebuilder.TypeGPU {
				continue
			}
			g := nodeGPU{GPU: GPU{Pool: s.Spec.Pool.Name, Device: d.Name, UUID: attr(d, slicebuilder.AttrUUID)}, minor: name.Minor,
				model: attr(d, slicebuilder.AttrProductName), tainted: len(d.Taints) > 0}
			g.published = g.UUID != "" && published[g.UUID]
			mc, ok := d.Attributes[slicebuilder.AttrMigCapable]
			g.capable = ok && mc.BoolValue != nil && *mc.BoolValue && attr(d, slicebuilder.AttrArchitecture) != "Ampere" && migSlots[g.Pool] && g.UUID != ""
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].minor < out[j].minor })
	r.gpus[node] = out
	return out
}

// template is the placements a spare of the model publishes: those of a
// GPU of the model that publishes them on the node, else of the first
// anywhere (nodes in name order). Untainted GPUs only, as the controller
// picks them.
func (r *Republisher) template(node, model string) *Template {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.templateOn(node, model); t != nil {
		return t
	}
	if t, ok := r.templates[model]; ok {
		return t
	}
	var t *Template
	for _, n := range r.nodes {
		if t = r.templateOn(n, model); t != nil {
			break
		}
	}
	r.templates[model] = t
	return t
}

func (r *Republisher) templateOn(node, model string) *Template {
	for _, g := range r.nodeGPUsLocked(node) {
		if g.published && !g.tainted && g.model == model {
			if t := ReadTemplate(r.byNode[node], g.GPU); t != nil {
				return t
			}
		}
	}
	return nil
}

// withoutPlacements is the node's slices once g is held whole: the
// plugin publishes none of its placements, nor its counter set, and its
// whole device consumes no counters (slicebuilder's readyGPUs). local is
// not changed.
func withoutPlacements(local []*resourceapi.ResourceSlice, g nodeGPU) []*resourceapi.ResourceSlice {
	counterSet := slicebuilder.CounterSetName(g.minor)
	out := make([]*resourceapi.ResourceSlice, 0, len(local))
	for _, s := range local {
		if s.Spec.Pool.Name != g.Pool {
			out = append(out, s)
			continue
		}
		c := s.DeepCopy()
		c.Spec.SharedCounters = slices.DeleteFunc(c.Spec.SharedCounters, func(cs resourceapi.CounterSet) bool { return cs.Name == counterSet })
		c.Spec.Devices = slices.DeleteFunc(c.Spec.Devices, func(d resourceapi.Device) bool {
			return attr(&d, slicebuilder.AttrType) == slicebuilder.TypeMIG && attr(&d, slicebuilder.AttrParentUUID) == g.UUID
		})
		for i := range c.Spec.Devices {
			if c.Spec.Devices[i].Name == g.Device {
				c.Spec.Devices[i].ConsumesCounters = nil
			}
		}
		out = append(out, c)
	}
	return out
}
