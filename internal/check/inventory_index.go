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
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// StandardDomain is the domain of the attributes Kubernetes defines
// (resource.kubernetes.io/pciBusID, …), which any driver may publish.
const StandardDomain = "resource.kubernetes.io"

// device is one device of the inventory.
type device struct {
	id     structured.DeviceID
	driver string
	pool   string
	name   string
	node   string // "" for devices not bound to one node
	dev    *resourceapi.Device
	input  cel.Device
}

func (d *device) label() string {
	if d.node != "" {
		return d.node + "/" + d.name
	}
	return d.pool + "/" + d.name
}

// inventory is the indexed ResourceSlices.
type inventory struct {
	slices  []*resourceapi.ResourceSlice
	nodes   []*v1.Node
	devices []*device
	byID    map[structured.DeviceID]*device
	drivers map[string]bool
	// attrs and caps: domain → name → type ("string", "int", "version",
	// "bool", "list"; "quantity" for capacities), over all devices.
	attrs map[string]map[string]string
	caps  map[string]map[string]string
	// counters: pool → counter set → counter → value, per driver.
	counters map[string]map[string]map[string]resourceapi.Counter
	// byPool are the devices of each pool ("driver/pool"), in inventory
	// order: what a node's plugin knows of its own node, read without
	// going over the fleet once per claim.
	byPool map[string][]*device
	// byNode are the indexes in devices of each node's devices ("" for
	// those not local to a node).
	byNode map[string][]int
}

// poolDevices are the devices of one of a driver's pools.
func (inv *inventory) poolDevices(driver, pool string) []*device {
	return inv.byPool[driver+"/"+pool]
}

func newInventory(slices []*resourceapi.ResourceSlice, nodes []*v1.Node) *inventory {
	inv := &inventory{
		slices:   slices,
		nodes:    nodes,
		byID:     map[structured.DeviceID]*device{},
		drivers:  map[string]bool{},
		attrs:    map[string]map[string]string{},
		caps:     map[string]map[string]string{},
		counters: map[string]map[string]map[string]resourceapi.Counter{},
		byPool:   map[string][]*device{},
		byNode:   map[string][]int{},
	}
	for _, s := range slices {
		driver := s.Spec.Driver
		inv.drivers[driver] = true
		poolKey := driver + "/" + s.Spec.Pool.Name
		for _, cs := range s.Spec.SharedCounters {
			if inv.counters[poolKey] == nil {
				inv.counters[poolKey] = map[string]map[string]resourceapi.Counter{}
			}
			inv.counters[poolKey][cs.Name] = cs.Counters
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			node := ""
			switch {
			case d.NodeName != nil:
				node = *d.NodeName
			case s.Spec.NodeName != nil:
				node = *s.Spec.NodeName
			}
			dev := &device{
				id:     structured.MakeDeviceID(driver, s.Spec.Pool.Name, d.Name),
				driver: driver, pool: s.Spec.Pool.Name, name: d.Name, node: node, dev: d,
				input: cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity},
			}
			inv.devices = append(inv.devices, dev)
			inv.byID[dev.id] = dev
			inv.byPool[poolKey] = append(inv.byPool[poolKey], dev)
			inv.byNode[node] = append(inv.byNode[node], len(inv.devices)-1)
			for name, a := range d.Attributes {
				dom, id := splitQualified(name, driver)
				addName(inv.attrs, dom, id, attributeTypeName(a))
			}
			for name := range d.Capacity {
				dom, id := splitQualified(name, driver)
				addName(inv.caps, dom, id, "quantity")
			}
		}
	}
	return inv
}

func addName(m map[string]map[string]string, dom, id, typ string) {
	if m[dom] == nil {
		m[dom] = map[string]string{}
	}
	if _, ok := m[dom][id]; !ok {
		m[dom][id] = typ
	}
}

// splitQualified splits an attribute or capacity name into domain and ID;
// unqualified names are in the driver's domain.
func splitQualified(name resourceapi.QualifiedName, driver string) (string, string) {
	if i := strings.LastIndex(string(name), "/"); i >= 0 {
		return string(name[:i]), string(name[i+1:])
	}
	return driver, string(name)
}

// attribute looks up device.attributes[domain][name].
func (d *device) attribute(domain, name string) (resourceapi.DeviceAttribute, bool) {
	if domain == d.driver {
		if a, ok := d.dev.Attributes[resourceapi.QualifiedName(name)]; ok {
			return a, true
		}
	}
	a, ok := d.dev.Attributes[resourceapi.QualifiedName(domain+"/"+name)]
	return a, ok
}

// capacity looks up device.capacity[domain][name].
func (d *device) capacity(domain, name string) (resourceapi.DeviceCapacity, bool) {
	if domain == d.driver {
		if c, ok := d.dev.Capacity[resourceapi.QualifiedName(name)]; ok {
			return c, true
		}
	}
	c, ok := d.dev.Capacity[resourceapi.QualifiedName(domain+"/"+name)]
	return c, ok
}

// evalKey is what a selector's result can depend on, given its refs: the
// driver and the values it reads. Two devices with the same key get the
// same result.
func (d *device) evalKey(s *selector) string {
	var b strings.Builder
	b.WriteString(d.driver)
	if d.dev.AllowMultipleAllocations != nil && *d.dev.AllowMultipleAllocations {
		b.WriteString("\x00multi")
	}
	for _, r := range s.refs {
		b.WriteByte(0)
		switch r.what {
		case "attributes":
			if a, ok := d.attribute(r.domain, r.name); ok {
				b.WriteString(attrValue(a))
			} else {
				b.WriteString("\x01missing")
			}
		case "capacity":
			if c, ok := d.capacity(r.domain, r.name); ok {
				b.WriteString(c.Value.String())
			} else {
				b.WriteString("\x01missing")
			}
		}
	}
	return b.String()
}

func attrValue(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "s:" + *a.StringValue
	case a.IntValue != nil:
		return "i:" + strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return "b:" + strconv.FormatBool(*a.BoolValue)
	case a.VersionValue != nil:
		return "v:" + *a.VersionValue
	}
	return fmt.Sprintf("x:%v", a)
}

// attrString renders an attribute value for messages.
func attrString(a resourceapi.DeviceAttribute) string {
	s := attrValue(a)
	return s[2:]
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// onNode are the indexes of the devices on a node and of those reachable
// from every node.
func (inv *inventory) onNode(node string) []int {
	return append(append([]int(nil), inv.byNode[node]...), inv.byNode[""]...)
}

// free says whether device i can still be allocated in state (what the
// claims allocated so far hold, in sequential mode): no
// claim holds it, or it allows multiple allocations (consumable
// capacity), in which case the allocator judges what is left of it.
func (inv *inventory) free(state *scheduler.State, i int) bool {
	d := inv.devices[i]
	if m := d.dev.AllowMultipleAllocations; m != nil && *m {
		return true
	}
	return len(state.Holders(d.id)) == 0
}

// countOn counts matching devices on a node (and those reachable from
// every node); onlyFree skips devices the claims in state hold.
func (inv *inventory) countOn(state *scheduler.State, match []bool, node string, onlyFree bool) int {
	n := 0
	for _, list := range [][]int{inv.byNode[node], inv.byNode[""]} {
		for _, i := range list {
			if match[i] && (!onlyFree || inv.free(state, i)) {
				n++
			}
		}
	}
	return n
}
