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
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"weak"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A fleet's ResourceSlices are a few slices over and over: nodes of one
// model publish the same devices, with the same attributes, capacities and
// counters, but for their names and their identities (UUIDs, PCI
// addresses). Held as the API server sends them, a DGX H100 node's slices
// take about 1.5 MiB of a controller's heap; 1000 nodes, 1.5 GiB.
//
// A Compactor keeps each distinct content once, as a shape, and of each
// slice only what differs: its name, node and pool, and the values of its
// identity attributes. The accounting reads the devices through the shape;
// the allocator, which needs whole slices, gets them rebuilt (Full) for
// the one node it is asked about. What a node costs is then a few hundred
// bytes per slice and sixteen per identity, whatever the layout; a slice
// unlike any other (a health taint on one of its devices) costs its own
// shape until it is like the others again.

// CompactSlice is a ResourceSlice as the controller's informer keeps it
// (Compactor.Compact). It is read-only: its shape is shared.
type CompactSlice struct {
	metav1.TypeMeta
	// ObjectMeta holds the name, UID and resource version only.
	metav1.ObjectMeta
	Driver string
	// NodeName is the node the slice's devices are on; empty for a slice
	// of devices that are not (AllNodes, a node selector, per-device
	// node selection).
	NodeName string
	Pool     resourceapi.ResourcePool

	shape *shape
	// identities are the values of the shape's identity slots, in order.
	identities []string
}

// DeepCopyObject makes CompactSlice a runtime.Object, as an informer's
// cache requires. The copy shares the shape and the identities, which no
// one changes.
func (s *CompactSlice) DeepCopyObject() runtime.Object {
	out := *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

var _ runtime.Object = (*CompactSlice)(nil)

// shape is the content that slices alike share.
type shape struct {
	// spec is the slices' spec without node name, pool and identity
	// attributes.
	spec resourceapi.ResourceSliceSpec
	// slots are the identity attributes the spec leaves out, by device
	// index and name, sorted.
	slots []slot
	// devices are the spec's devices as the accounting reads them,
	// without pool, node and identities (CompactSlice.devices adds them).
	devices []Device
	// fingerprint is fingerprintOf the slices, which ignores identities.
	fingerprint uint64
	// nodeNames are the nodes the devices name one by one (per-device node
	// selection), sorted.
	nodeNames []string
}

// slot is one identity attribute of one device.
type slot struct {
	device int
	name   resourceapi.QualifiedName
	// integer: the value is an integer (a tray's index), kept in
	// CompactSlice.identities in decimal.
	integer bool
}

// isIdentity reports whether an attribute is one whose values differ
// between nodes alike (slicebuilder.IdentityAttributes).
func isIdentity(name resourceapi.QualifiedName, a resourceapi.DeviceAttribute) bool {
	return (a.StringValue != nil || a.IntValue != nil) && readsIdentity(string(name))
}

// Compactor turns ResourceSlices into CompactSlices, sharing one shape
// between slices alike. A shape lives as long as a slice uses it. It is
// safe for concurrent use.
type Compactor struct {
	mu     sync.Mutex
	shapes map[[sha256.Size]byte]weak.Pointer[shape]
	// sweepAt is the table size at which dead entries are dropped next.
	sweepAt int
}

// Compact returns the compact form of a slice. It keeps no reference to
// s.
func (c *Compactor) Compact(s *resourceapi.ResourceSlice) *CompactSlice {
	out := &CompactSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Driver:     s.Spec.Driver,
		Pool:       s.Spec.Pool,
	}
	if s.Spec.NodeName != nil {
		out.NodeName = *s.Spec.NodeName
	}
	spec := s.Spec
	spec.NodeName = nil
	spec.Pool = resourceapi.ResourcePool{}
	spec.Devices = slices.Clone(s.Spec.Devices)
	var slots []slot
	seen := map[string]string{} // values repeat: a GPU's UUID is its partitions' parentUUID
	for i := range spec.Devices {
		d := &spec.Devices[i]
		var names []resourceapi.QualifiedName
		for k, a := range d.Attributes {
			if isIdentity(k, a) {
				names = append(names, k)
			}
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		attrs := maps.Clone(d.Attributes)
		for _, k := range names {
			var v string
			integer := attrs[k].IntValue != nil
			if integer {
				v = strconv.FormatInt(*attrs[k].IntValue, 10)
			} else {
				v = *attrs[k].StringValue
			}
			if interned, ok := seen[v]; ok {
				v = interned
			} else {
				v = strings.Clone(v)
				seen[v] = v
			}
			slots = append(slots, slot{device: i, name: k, integer: integer})
			out.identities = append(out.identities, v)
			delete(attrs, k)
		}
		d.Attributes = attrs
	}
	out.shape = c.shapeOf(spec, slots)
	return out
}

// shapeOf returns the shape of this content, the one already known or a
// new one.
func (c *Compactor) shapeOf(spec resourceapi.ResourceSliceSpec, slots []slot) *shape {
	key := shapeKey(&spec, slots)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shapes == nil {
		c.shapes = map[[sha256.Size]byte]weak.Pointer[shape]{}
	}
	if sh := c.shapes[key].Value(); sh != nil {
		return sh
	}
	sh := newShape(spec, slots)
	c.shapes[key] = weak.Make(sh)
	if len(c.shapes) >= c.sweepAt {
		c.sweep()
	}
	return sh
}

// sweep drops the entries of shapes no slice uses any more, and sets when
// to sweep next: once the table has doubled.
func (c *Compactor) sweep() {
	for k, p := range c.shapes {
		if p.Value() == nil {
			delete(c.shapes, k)
		}
	}
	c.sweepAt = max(64, 2*len(c.shapes))
}

// shapeKey identifies a content: the spec's protobuf encoding (which
// sorts map keys) and the identity slots.
func shapeKey(spec *resourceapi.ResourceSliceSpec, slots []slot) [sha256.Size]byte {
	b, err := spec.Marshal()
	if err != nil {
		// A spec decoded from the API server always encodes.
		panic(fmt.Sprintf("encode a ResourceSlice spec: %v", err))
	}
	h := sha256.New()
	_, _ = h.Write(b)
	var n [8]byte
	for _, s := range slots {
		binary.LittleEndian.PutUint64(n[:], uint64(s.device))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s.name))
		if s.integer {
			_, _ = h.Write([]byte{1})
		} else {
			_, _ = h.Write([]byte{0})
		}
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

func newShape(spec resourceapi.ResourceSliceSpec, slots []slot) *shape {
	sh := &shape{spec: spec, slots: slots}
	full := &resourceapi.ResourceSlice{Spec: spec}
	sh.fingerprint = fingerprintOf(full)
	sh.devices = make([]Device, len(spec.Devices))
	for i := range spec.Devices {
		sh.devices[i] = readDevice(spec.Driver, &spec.Devices[i])
	}
	names := map[string]bool{}
	for _, d := range spec.Devices {
		if d.NodeName != nil && *d.NodeName != "" {
			names[*d.NodeName] = true
		}
	}
	sh.nodeNames = slices.Sorted(maps.Keys(names))
	return sh
}

// Full rebuilds the ResourceSlice, for the allocator: a new object whose
// unchanged parts (devices without identities, capacities, counters) are
// shared with the shape and must not be changed.
func (s *CompactSlice) Full() *resourceapi.ResourceSlice {
	out := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Spec:       s.shape.spec,
	}
	if s.NodeName != "" {
		out.Spec.NodeName = &s.NodeName
	}
	out.Spec.Pool = s.Pool
	if len(s.shape.slots) == 0 {
		return out
	}
	out.Spec.Devices = slices.Clone(s.shape.spec.Devices)
	for i, sl := range s.shape.slots {
		d := &out.Spec.Devices[sl.device]
		if i == 0 || s.shape.slots[i-1].device != sl.device {
			attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(d.Attributes)+2)
			maps.Copy(attrs, d.Attributes)
			d.Attributes = attrs
		}
		if sl.integer {
			// Compact wrote it with strconv.FormatInt.
			n, _ := strconv.ParseInt(s.identities[i], 10, 64)
			d.Attributes[sl.name] = resourceapi.DeviceAttribute{IntValue: &n}
			continue
		}
		d.Attributes[sl.name] = resourceapi.DeviceAttribute{StringValue: &s.identities[i]}
	}
	return out
}

// devices are the slice's devices as the accounting reads them, one per
// device of the spec.
func (s *CompactSlice) devices() []*Device {
	all := slices.Clone(s.shape.devices)
	out := make([]*Device, len(all))
	for i := range all {
		all[i].ID.Pool, all[i].Node = s.Pool.Name, s.NodeName
		out[i] = &all[i]
	}
	uuid, parentUUID := qualify(s.Driver, attrUUID), qualify(s.Driver, attrParentUUID)
	for i, sl := range s.shape.slots {
		switch sl.name {
		case uuid.short, uuid.long:
			all[sl.device].UUID = s.identities[i]
		case parentUUID.short, parentUUID.long:
			all[sl.device].ParentUUID = s.identities[i]
		}
	}
	return out
}
