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
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// A fleet is mostly identical nodes in a few states: the allocator gives
// the same answer on two nodes whose ResourceSlices publish the same
// devices (but for their identities: UUIDs, PCI addresses) and that have
// the same devices allocated. Strand asks it once per class of such nodes
// and maps the answer to the others by device name. A pending pod whose
// selectors read an identity (a UUID, a PCI address) is asked about on
// every node.

// identityAttributes are slicebuilder.IdentityAttributes (the attributes
// whose values differ between nodes that are otherwise alike, marked in
// slicebuilder.Variations) by the name a selector uses: without the
// standard attributes' domain. It is no list of its own, only those names
// cut once, since fingerprintOf asks about every attribute of every
// device. A selector that names one makes the answer node-specific.
var identityAttributes = func() []string {
	var out []string
	for _, a := range slicebuilder.IdentityAttributes {
		name := string(a)
		out = append(out, name[strings.LastIndex(name, "/")+1:])
	}
	return out
}()

// readsIdentity reports whether a CEL selector names an identity
// attribute.
func readsIdentity(expr string) bool {
	return slices.ContainsFunc(identityAttributes, func(a string) bool { return strings.Contains(expr, a) })
}

// fingerprintOf hashes what the allocator reads of a slice, but for
// identity attributes. Map entries (attributes, capacities, counters) are
// hashed one by one and summed, so their order does not matter and
// nothing is sorted: a fleet has hundreds of thousands of devices.
func fingerprintOf(s *resourceapi.ResourceSlice) uint64 {
	h := fnv.New64a()
	w := func(parts ...string) {
		for _, p := range parts {
			_, _ = h.Write([]byte(p))
			_, _ = h.Write([]byte{0})
		}
	}
	entry := func(parts ...string) uint64 {
		e := fnv.New64a()
		for _, p := range parts {
			_, _ = e.Write([]byte(p))
			_, _ = e.Write([]byte{0})
		}
		return e.Sum64()
	}
	sum := func(v uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = h.Write(b[:])
	}
	quantity := func(q resourceapi.DeviceCounterConsumption, name string) string {
		v := q.Counters[name].Value
		return v.String()
	}
	w(s.Spec.Driver)
	for _, d := range s.Spec.Devices {
		w("device", d.Name)
		var m uint64
		for k, a := range d.Attributes {
			if !readsIdentity(string(k)) {
				m += entry(string(k), attrString(a))
			}
		}
		for k, c := range d.Capacity {
			m += entry("cap", string(k), c.Value.String())
		}
		sum(m)
		for _, cc := range d.ConsumesCounters {
			w("consumes", cc.CounterSet)
			var c uint64
			for k := range cc.Counters {
				c += entry(k, quantity(cc, k))
			}
			sum(c)
		}
		for _, t := range d.Taints {
			w("taint", t.Key, t.Value, string(t.Effect))
		}
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			w("multi")
		}
	}
	for _, cs := range s.Spec.SharedCounters {
		w("counterset", cs.Name)
		var c uint64
		for k, v := range cs.Counters {
			c += entry(k, v.Value.String())
		}
		sum(c)
	}
	return h.Sum64()
}

func attrString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "s" + *a.StringValue
	case a.IntValue != nil:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(*a.IntValue))
		return "i" + string(b[:])
	case a.BoolValue != nil:
		if *a.BoolValue {
			return "btrue"
		}
		return "bfalse"
	case a.VersionValue != nil:
		return "v" + *a.VersionValue
	}
	return ""
}

// nodeClasses groups nodes by what the allocator sees on them: the
// fingerprints of their newest slices, and which of their devices are
// allocated (by name). It returns, per class key, the node names in the
// order given.
func nodeClasses(nodeOrder []string, sl []*CompactSlice, allocated map[string][]string) map[string]string {
	// The newest generation of each pool.
	newest := map[string]int64{}
	for _, s := range sl {
		k := s.Driver + "/" + s.Pool.Name
		newest[k] = max(newest[k], s.Pool.Generation)
	}
	perNode := map[string][]uint64{}
	for _, s := range sl {
		if s.NodeName == "" || s.Pool.Generation != newest[s.Driver+"/"+s.Pool.Name] {
			continue // shared by all nodes alike, or on its way out
		}
		perNode[s.NodeName] = append(perNode[s.NodeName], s.shape.fingerprint)
	}
	out := make(map[string]string, len(nodeOrder))
	for _, n := range nodeOrder {
		sums := perNode[n]
		slices.Sort(sums)
		h := fnv.New64a()
		var b [8]byte
		for _, s := range sums {
			binary.LittleEndian.PutUint64(b[:], s)
			_, _ = h.Write(b[:])
		}
		names := slices.Clone(allocated[n])
		slices.Sort(names)
		for _, d := range names {
			_, _ = h.Write([]byte(d))
			_, _ = h.Write([]byte{0})
		}
		binary.LittleEndian.PutUint64(b[:], h.Sum64())
		out[n] = string(b[:])
	}
	return out
}
