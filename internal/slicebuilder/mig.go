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

package slicebuilder

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/gpu"
)

// MIG attribute names (type=mig devices), beside the GPU's that a
// partition carries too (PartitionParentAttributes). They are few on
// purpose: every attribute is bytes in every ResourceSlice the API server
// and each informer hold, and a map entry in every CEL evaluation of the
// device.
const (
	// AttrProfile is the MIG profile, e.g. "1g.10gb".
	AttrProfile resourceapi.QualifiedName = "profile"
	// AttrParentUUID is the UUID of the GPU the partition is cut from; use
	// it with matchAttribute to get several partitions of one GPU.
	AttrParentUUID resourceapi.QualifiedName = "parentUUID"
)

// MIG capacity names besides memory and multiprocessors.
const (
	CapCopyEngines resourceapi.QualifiedName = "copyEngines"
	CapDecoders    resourceapi.QualifiedName = "decoders"
	CapEncoders    resourceapi.QualifiedName = "encoders"
	CapJPEGEngines resourceapi.QualifiedName = "jpegEngines"
	CapOFAEngines  resourceapi.QualifiedName = "ofaEngines"
)

// TypeMIG is the value of AttrType on a MIG partition.
const TypeMIG = "mig"

// CounterComputeSlices is the counter of a GPU's compute slices, published
// only on a GPU whose compute slices bind beyond its memory slices
// (gpu.MIG.ComputeLimitBinds; none that gpudra knows).
const CounterComputeSlices = "compute-slices"

// CounterSetName is the counter set of the GPU with the given minor.
func CounterSetName(minor int) string { return fmt.Sprintf("gpu-%d-counters", minor) }

// MemorySliceCounter is the counter of memory slice i.
func MemorySliceCounter(i int) string { return fmt.Sprintf("memory-slice-%d", i) }

// InstancesCounter is the counter that bounds the number of instances of a
// profile the GPU holds fewer of than it has placements.
func InstancesCounter(profile string) string { return gpu.MigProfileToken(profile) + "-instances" }

// Partitionable says whether gpudra publishes a GPU's MIG placements: it
// is MIG-capable, and either MIG mode is on or it can be switched on
// without a GPU reset (Hopper and later). An Ampere GPU with MIG mode off
// is published whole only: turning MIG on would need a reset that would
// kill whatever runs on it.
func Partitionable(g gpu.GPU) bool {
	return g.MIG != nil && len(g.MIG.Profiles) > 0 && (g.MigEnabled || !g.MIG.ModeChangeNeedsReset)
}

// migGPU is the partitionable part of one GPU's publication.
type migGPU struct {
	counterSet resourceapi.CounterSet
	// wholeConsumes is what the whole GPU consumes: everything.
	wholeConsumes []resourceapi.DeviceCounterConsumption
	// wholeUsable is false where the GPU cannot be handed out whole: an
	// admin's instances are on it, or MIG mode is on and needs a reset to
	// turn off.
	wholeUsable bool
	// placements are every placement that can be published, in profile
	// and placement order; devices builds them (only for the GPUs that
	// publish them: building all 200 of a DGX H100 on every publish was
	// most of the slice builder's work).
	placements []migPlacement
	devices    func() []resourceapi.Device
}

// migPlacement is one profile × placement of a GPU.
type migPlacement struct {
	profile gpu.MigProfile
	at      gpu.MigPlacement
}

// buildMIG describes a partitionable GPU: its counter set, what the whole
// GPU consumes, and one device per profile × placement that no admin
// instance overlaps.
//
// The counter set holds only counters that can refuse a combination: one
// per memory slice (placements that share one never go together), one per
// profile the GPU holds fewer instances of than it has placements, and
// the compute slices where they bind beyond the memory slices (on no GPU
// gpudra knows). Counters for memory, multiprocessors and engines sized
// for the most any combination takes would never refuse one, and each
// is a counter reference on every device, which the scheduler's allocator
// converts and checks on every Filter call (docs/performance.md).
func buildMIG(g gpu.GPU, shared gpuAttributes, admin []gpu.MigInstance, health gpu.Health, driverName string, choice MigProfiles) migGPU {
	m := g.MIG
	published := slices.DeleteFunc(slices.Clone(m.Profiles), func(p gpu.MigProfile) bool { return !choice.publishes(p.Name) })
	adminCount := map[uint32]int{}
	adminCompute := 0
	for _, inst := range admin {
		if p, ok := m.ProfileByID(inst.ProfileID); ok {
			adminCount[p.ID]++
			adminCompute += p.ComputeSlices
		}
	}
	counters := map[string]resourceapi.Counter{}
	put := func(name string, v int64) {
		if v > 0 {
			counters[name] = resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
		}
	}
	for i := range m.MemorySlices {
		free := int64(1)
		for _, inst := range admin {
			if inst.Placement.Overlaps(gpu.MigPlacement{Start: i, Size: 1}) {
				free = 0
			}
		}
		put(MemorySliceCounter(i), free)
	}
	computeBinds := m.ComputeLimitBinds()
	if computeBinds {
		put(CounterComputeSlices, int64(m.ComputeSlices-adminCompute))
	}
	limited := map[uint32]bool{}
	for _, p := range m.LimitedProfiles() {
		if choice.publishes(p.Name) {
			limited[p.ID] = true
			put(InstancesCounter(p.Name), int64(p.InstanceCount-adminCount[p.ID]))
		}
	}
	setName := CounterSetName(g.Minor)
	out := migGPU{
		counterSet:  resourceapi.CounterSet{Name: setName, Counters: counters},
		wholeUsable: len(admin) == 0 && !(g.MigEnabled && m.ModeChangeNeedsReset),
	}
	all := make(map[string]resourceapi.Counter, len(counters))
	for k, v := range counters {
		all[k] = v
	}
	out.wholeConsumes = []resourceapi.DeviceCounterConsumption{{CounterSet: setName, Counters: all}}

	for _, p := range published {
		for _, pl := range p.Placements {
			if !overlapsAny(pl, admin) {
				out.placements = append(out.placements, migPlacement{p, pl})
			}
		}
	}
	out.devices = func() []resourceapi.Device {
		taints := healthTaints(driverName, health)
		devs := make([]resourceapi.Device, 0, len(out.placements))
		for _, pl := range out.placements {
			d := migDevice(g, shared, pl.profile, pl.at, limited[pl.profile.ID], counters)
			d.Taints = taints
			devs = append(devs, d)
		}
		return devs
	}
	return out
}

func overlapsAny(pl gpu.MigPlacement, insts []gpu.MigInstance) bool {
	for _, inst := range insts {
		if pl.Overlaps(inst.Placement) {
			return true
		}
	}
	return false
}

// migAttributes is how many attributes a MIG placement can have: its
// own three and PartitionParentAttributes.
var migAttributes = 3 + len(PartitionParentAttributes)

// migDevice is one MIG placement as a device of type TypeMIG. It carries
// what users select partitions by: the profile, the GPU it is cut from
// (parentUUID, for matchAttribute), and the GPU's attributes that
// NVIDIA's MIG devices carry (PartitionParentAttributes), so that
// selectors written for NVIDIA's partitions evaluate on gpudra's. Not the
// GPU's NVLink island, NUMA node or MIG capability, nor its uuid, index
// or minor: they are on the whole GPU, and a DeviceClass of gpudra's
// selects one type of device, so a claim's selectors never see a
// partition unless they ask for partitions (docs/mig.md, "Attributes").
// The placement is in the device's name (gpu.MigDeviceName).
func migDevice(g gpu.GPU, shared gpuAttributes, p gpu.MigProfile, pl gpu.MigPlacement, limited bool, available map[string]resourceapi.Counter) resourceapi.Device {
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, migAttributes)
	attrs[AttrType] = stringAttr(TypeMIG)
	attrs[AttrProfile] = stringAttr(p.Name)
	attrs[AttrParentUUID] = stringAttr(g.UUID)
	for _, name := range PartitionParentAttributes {
		if v, ok := shared.attrs[name]; ok {
			attrs[name] = *v.DeepCopy()
		}
	}
	count := func(n int) resourceapi.DeviceCapacity {
		return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(n), resource.DecimalSI)}
	}
	capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		CapMemory:          {Value: *resource.NewQuantity(int64(p.MemoryBytes), resource.BinarySI)},
		CapMultiprocessors: count(p.Multiprocessors),
		CapCopyEngines:     count(p.CopyEngines),
		CapDecoders:        count(p.Decoders),
		CapEncoders:        count(p.Encoders),
		CapJPEGEngines:     count(p.JPEGEngines),
		CapOFAEngines:      count(p.OFAEngines),
	}
	consumed := map[string]resourceapi.Counter{}
	use := func(name string, v int64, format resource.Format) {
		if _, ok := available[name]; ok && v > 0 {
			consumed[name] = resourceapi.Counter{Value: *resource.NewQuantity(v, format)}
		}
	}
	use(CounterComputeSlices, int64(p.ComputeSlices), resource.DecimalSI)
	for i := pl.Start; i < pl.Start+pl.Size; i++ {
		use(MemorySliceCounter(i), 1, resource.DecimalSI)
	}
	if limited {
		use(InstancesCounter(p.Name), 1, resource.DecimalSI)
	}
	return resourceapi.Device{
		Name:             gpu.MigDeviceName(g.Minor, p.Name, pl.Start),
		Attributes:       attrs,
		Capacity:         capacity,
		ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: CounterSetName(g.Minor), Counters: consumed}},
	}
}
