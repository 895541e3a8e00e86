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
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// DeviceID names one device: its pool (gpudra names pools after nodes) and
// its name in the pool.
type DeviceID struct {
	Pool   string
	Device string
}

// Device is one published device, reduced to what the accounting reads.
type Device struct {
	ID   DeviceID
	Node string
	// Model is the productName attribute ("NVIDIA H100 80GB HBM3").
	Model string
	// Type is slicebuilder.TypeGPU or slicebuilder.TypeMIG.
	Type string
	// Profile is the MIG profile of a partition ("1g.10gb"); "" for a
	// whole GPU.
	Profile string
	// UUID is a whole GPU's UUID; ParentUUID a partition's parent's.
	UUID, ParentUUID string
	// Tainted lists the effects of the device's taints.
	Taints []resourceapi.DeviceTaint
	// Shareable devices take several allocations at once
	// (allowMultipleAllocations, consumable capacity).
	Shareable bool
	// MemoryBytes is the device's memory capacity; 0 when it publishes
	// none.
	MemoryBytes int64
	// MigCapable and Architecture are a whole GPU's (the migCapable and
	// architecture attributes): whether it could be partitioned while it
	// publishes no placements (migview.go).
	MigCapable   bool
	Architecture string
}

// inventory is the driver's published devices, in the order of the
// slices, and a lookup by ID.
type inventory struct {
	devices []*Device
	// pools holds, per pool, its slices' devices by name.
	pools map[string][]map[string]*Device
	// schedulable are the nodes a new pod can be placed on.
	schedulable map[string]bool
	// pool is each node's node pool (NodePool), for the spares that
	// follow a pool's partition demand.
	pool map[string]string
	// migSlots are the pools with a slice that holds no device: the
	// counter sets and placements of partitionable GPUs that publish
	// none have slices of their own, kept empty (slicebuilder's layout;
	// in fleet mode a node none of whose GPUs publishes placements keeps
	// exactly one, its counter slice, for this), which a pool that
	// publishes no MIG (--mig-profiles=none, or a cluster without
	// partitionable devices) does not have.
	migSlots map[string]bool
}

// lookup finds a device by ID.
func (inv inventory) lookup(id DeviceID) (*Device, bool) {
	for _, byName := range inv.pools[id.Pool] {
		if d, ok := byName[id.Device]; ok {
			return d, true
		}
	}
	return nil, false
}

// sliceEntry is what one slice contributes, read once per resource
// version: a fleet publishes hundreds of thousands of devices, and
// between two recomputes almost no slice changes.
type sliceEntry struct {
	resourceVersion string
	devices         []*Device
	byName          map[string]*Device
}

// sliceCache keeps sliceEntries by slice UID. A slice without UID or
// resource version (tests, files) is read afresh every time.
type sliceCache struct {
	driver  string
	byUID   map[types.UID]*sliceEntry
	touched map[types.UID]bool
}

// entry returns the slice's entry, reading it if it is new or changed.
func (c *sliceCache) entry(s *CompactSlice) *sliceEntry {
	cacheable := s.UID != "" && s.ResourceVersion != ""
	if cacheable {
		if c.byUID == nil {
			c.byUID = map[types.UID]*sliceEntry{}
		}
		if c.touched == nil {
			c.touched = map[types.UID]bool{}
		}
		c.touched[s.UID] = true
		if e, ok := c.byUID[s.UID]; ok && e.resourceVersion == s.ResourceVersion {
			return e
		}
	}
	e := &sliceEntry{resourceVersion: s.ResourceVersion}
	if s.Driver == c.driver {
		all := s.devices()
		e.devices = make([]*Device, 0, len(all))
		e.byName = make(map[string]*Device, len(all))
		for _, d := range all {
			if _, dup := e.byName[d.ID.Device]; !dup { // the API server forbids it; a file may not
				e.byName[d.ID.Device] = d
				e.devices = append(e.devices, d)
			}
		}
	}
	if cacheable {
		c.byUID[s.UID] = e
	}
	return e
}

// forget drops the entries of slices that were not looked at since the
// last call (deleted slices), so the cache does not grow without bound.
func (c *sliceCache) forget() {
	for uid := range c.byUID {
		if !c.touched[uid] {
			delete(c.byUID, uid)
		}
	}
	c.touched = map[types.UID]bool{}
}

// attrName is an attribute's name, as a device may spell it: short, or
// qualified with the driver's domain.
type attrName struct{ short, long resourceapi.QualifiedName }

func qualify(driver string, n resourceapi.QualifiedName) attrName {
	return attrName{n, resourceapi.QualifiedName(driver + "/" + string(n))}
}

const (
	attrUUID       = slicebuilder.AttrUUID
	attrParentUUID = slicebuilder.AttrParentUUID
)

// readDevice reads one device of a slice of the driver.
func readDevice(driver string, d *resourceapi.Device) Device {
	str := func(n resourceapi.QualifiedName) string {
		name := qualify(driver, n)
		a, ok := d.Attributes[name.short]
		if !ok {
			a = d.Attributes[name.long]
		}
		if a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	boolean := func(n resourceapi.QualifiedName) bool {
		name := qualify(driver, n)
		a, ok := d.Attributes[name.short]
		if !ok {
			a = d.Attributes[name.long]
		}
		return a.BoolValue != nil && *a.BoolValue
	}
	dev := Device{
		ID:           DeviceID{Device: d.Name},
		MigCapable:   boolean(slicebuilder.AttrMigCapable),
		Architecture: str(slicebuilder.AttrArchitecture),
		Model:        str(slicebuilder.AttrProductName),
		Type:         str(slicebuilder.AttrType),
		Profile:      str(slicebuilder.AttrProfile),
		UUID:         str(attrUUID),
		ParentUUID:   str(attrParentUUID),
		Taints:       d.Taints,
		Shareable:    d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations,
	}
	memory := qualify(driver, slicebuilder.CapMemory)
	if c, ok := d.Capacity[memory.short]; ok {
		dev.MemoryBytes = c.Value.Value()
	} else if c, ok := d.Capacity[memory.long]; ok {
		dev.MemoryBytes = c.Value.Value()
	}
	return dev
}

// newInventory reads the newest generation of every pool of the driver,
// through the cache.
func newInventory(cache *sliceCache, sl []*CompactSlice, nodes []*corev1.Node, poolLabels []string) inventory {
	newest := map[string]int64{}
	for _, s := range sl {
		if s.Driver == cache.driver {
			newest[s.Pool.Name] = max(newest[s.Pool.Name], s.Pool.Generation)
		}
	}
	inv := inventory{pools: map[string][]map[string]*Device{}, schedulable: map[string]bool{}, pool: map[string]string{}, migSlots: map[string]bool{}}
	for _, s := range sl {
		if s.Driver != cache.driver || s.Pool.Generation != newest[s.Pool.Name] {
			continue
		}
		if len(s.shape.spec.Devices) == 0 {
			inv.migSlots[s.Pool.Name] = true
		}
		e := cache.entry(s)
		inv.devices = append(inv.devices, e.devices...)
		inv.pools[s.Pool.Name] = append(inv.pools[s.Pool.Name], e.byName)
	}
	for _, n := range nodes {
		inv.schedulable[n.Name] = !n.Spec.Unschedulable && nodeReady(n)
		inv.pool[n.Name] = NodePool(n.Labels, poolLabels)
	}
	return inv
}

// DefaultPoolLabels are the labels that name a node's pool on the
// common node provisioners and managed clusters, in the order they are
// looked for (gpudra-controller's --mig-spare-pool-labels): Karpenter,
// GKE, EKS managed node groups, AKS.
var DefaultPoolLabels = []string{
	"karpenter.sh/nodepool",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"kubernetes.azure.com/agentpool",
}

// NodePool is the node pool a node belongs to: "label=value" of the
// first of the labels it carries, "" (one pool of the nodes without
// any) when it carries none.
func NodePool(labels map[string]string, poolLabels []string) string {
	for _, l := range poolLabels {
		if v, ok := labels[l]; ok {
			return l + "=" + v
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
