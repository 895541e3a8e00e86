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

// Package spareedit edits a node's published ResourceSlices as its
// plugin would publish them with one more MIG spare: a free
// partitionable GPU's counter set and placements, copied from a GPU of
// the same model that publishes them, with the spare GPU's own
// attributes that its partitions carry. gpudra-controller uses it to
// ask the allocator where a spare would let a waiting pod in
// (internal/fleet), and gpudra check to model the spare refill on
// slices read from files or a cluster, which no profile describes
// (Republisher).
package spareedit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// GPU names a whole GPU among a node's slices: its pool, its device
// name (gpu-<minor>) and its UUID.
type GPU struct {
	Pool, Device, UUID string
}

// Template is one GPU of a model as it publishes its MIG placements: its
// counter set, what its whole device consumes while they are published,
// and the placements.
type Template struct {
	// Driver is the driver of the slices the placements are in.
	Driver string
	// Minor is the template GPU's minor, which its names carry.
	Minor    int
	Counters *resourceapi.CounterSet
	Whole    []resourceapi.DeviceCounterConsumption
	MIGs     []resourceapi.Device
}

// ReadTemplate reads one GPU's counter set, whole device's counter use
// and placements from its node's slices; nil when it publishes no
// placements.
func ReadTemplate(sl []*resourceapi.ResourceSlice, whole GPU) *Template {
	p, ok := gpu.ParseDeviceName(whole.Device)
	if !ok || p.MIG {
		return nil
	}
	t := &Template{Minor: p.Minor}
	counterSet := slicebuilder.CounterSetName(p.Minor)
	for _, s := range sl {
		for i := range s.Spec.SharedCounters {
			if s.Spec.SharedCounters[i].Name == counterSet {
				t.Counters = s.Spec.SharedCounters[i].DeepCopy()
			}
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			switch {
			case d.Name == whole.Device:
				for _, c := range d.ConsumesCounters {
					t.Whole = append(t.Whole, *c.DeepCopy())
				}
			case attr(d, slicebuilder.AttrParentUUID) == whole.UUID && attr(d, slicebuilder.AttrType) == slicebuilder.TypeMIG:
				t.MIGs = append(t.MIGs, *d.DeepCopy())
				t.Driver = s.Spec.Driver
			}
		}
	}
	if len(t.MIGs) == 0 {
		return nil
	}
	return t
}

func attr(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// WithSpare edits a node's slices to publish g's placements as t lays
// them out: two slices more in g's pool (its counter set, its
// placements), the pool's slice count raised to match, and g's whole
// device consuming the counter set. local is not changed.
func WithSpare(local []*resourceapi.ResourceSlice, g GPU, t *Template) []*resourceapi.ResourceSlice {
	p, _ := gpu.ParseDeviceName(g.Device)
	from, to := fmt.Sprintf("gpu-%d-", t.Minor), fmt.Sprintf("gpu-%d-", p.Minor)
	rename := func(name string) string {
		if rest, ok := strings.CutPrefix(name, from); ok {
			return to + rest
		}
		return name
	}
	counterSet := slicebuilder.CounterSetName(p.Minor)
	consumption := func(cs []resourceapi.DeviceCounterConsumption) []resourceapi.DeviceCounterConsumption {
		out := make([]resourceapi.DeviceCounterConsumption, 0, len(cs))
		for _, c := range cs {
			c = *c.DeepCopy()
			c.CounterSet = rename(c.CounterSet)
			out = append(out, c)
		}
		return out
	}
	added := 1 // the placements' slice
	if t.Counters != nil {
		added++ // the counter set's
	}
	var base *resourceapi.ResourceSlice
	var parent map[resourceapi.QualifiedName]resourceapi.DeviceAttribute // g's whole device's
	out := make([]*resourceapi.ResourceSlice, 0, len(local)+added)
	for _, s := range local {
		if s.Spec.Pool.Name != g.Pool {
			out = append(out, s)
			continue
		}
		c := s.DeepCopy()
		c.Spec.Pool.ResourceSliceCount += int64(added)
		c.Spec.SharedCounters = slices.DeleteFunc(c.Spec.SharedCounters, func(cs resourceapi.CounterSet) bool { return cs.Name == counterSet })
		for i := range c.Spec.Devices {
			if c.Spec.Devices[i].Name != g.Device {
				continue
			}
			parent = c.Spec.Devices[i].Attributes
			if t.Counters != nil {
				c.Spec.Devices[i].ConsumesCounters = consumption(t.Whole)
			}
		}
		base = c
		out = append(out, c)
	}
	if base == nil {
		return local
	}
	slice := func(suffix string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: base.Spec.Driver, NodeName: base.Spec.NodeName, Pool: base.Spec.Pool}}
		// Named for g, so that two spares added to one pool keep
		// their slices apart.
		s.Name = fmt.Sprintf("%s-spare-%d-%s", g.Pool, p.Minor, suffix)
		return s
	}
	if t.Counters != nil {
		cs := slice("counters")
		c := *t.Counters.DeepCopy()
		c.Name = counterSet
		cs.Spec.SharedCounters = []resourceapi.CounterSet{c}
		out = append(out, cs)
	}
	devs := slice("placements")
	for _, d := range t.MIGs {
		d = *d.DeepCopy()
		d.Name = rename(d.Name)
		d.Attributes[slicebuilder.AttrParentUUID] = resourceapi.DeviceAttribute{StringValue: &g.UUID}
		d.Attributes = WithParent(d.Attributes, parent)
		d.ConsumesCounters = consumption(d.ConsumesCounters)
		d.Taints = nil
		devs.Spec.Devices = append(devs.Spec.Devices, d)
	}
	return append(out, devs)
}

// WithParent is a template placement's attributes as g's own placement
// carries them: the GPU's attributes a partition carries
// (slicebuilder.PartitionParentAttributes) are g's, from parent (g's
// whole device), not the template's GPU's, since another node may run
// another driver and g has its own PCI address. attrs is not changed.
func WithParent(attrs, parent map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	out := maps.Clone(attrs)
	for _, name := range slicebuilder.PartitionParentAttributes {
		if v, ok := parent[name]; ok {
			out[name] = v
		} else {
			delete(out, name)
		}
	}
	return out
}
