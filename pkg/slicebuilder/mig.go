package slicebuilder

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// MIG attribute names (type=mig devices). They are few on purpose: every
// attribute costs CEL time on every device the scheduler looks at.
const (
	// AttrProfile is the MIG profile, e.g. "1g.10gb".
	AttrProfile resourceapi.QualifiedName = "profile"
	// AttrParentUUID is the UUID of the GPU the partition is cut from; use
	// it with matchAttribute to get several partitions of one GPU.
	AttrParentUUID resourceapi.QualifiedName = "parentUUID"
	// AttrParentIndex is the NVML index of that GPU.
	AttrParentIndex resourceapi.QualifiedName = "parentIndex"
	// AttrPlacementStart and AttrPlacementSize are the placement, in
	// memory slices.
	AttrPlacementStart resourceapi.QualifiedName = "placementStart"
	AttrPlacementSize  resourceapi.QualifiedName = "placementSize"
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

// Counter names in a GPU's counter set.
const (
	CounterMemory          = "memory"
	CounterMultiprocessors = "multiprocessors"
	CounterCopyEngines     = "copy-engines"
	CounterDecoders        = "decoders"
	CounterEncoders        = "encoders"
	CounterJPEGEngines     = "jpeg-engines"
	CounterOFAEngines      = "ofa-engines"
)

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
	placements  []resourceapi.Device
}

// buildMIG describes a partitionable GPU: its counter set, what the whole
// GPU consumes, and one device per profile × placement that no admin
// instance overlaps.
func buildMIG(g gpu.GPU, shared gpuAttributes, admin []gpu.MigInstance, health gpu.Health, driverName string, choice MigProfiles) (migGPU, error) {
	m := g.MIG
	// The counters are sized for every profile of the GPU, published or
	// not: what accepts every combination the hardware accepts accepts
	// every combination of the published ones. Only the placements (and
	// the instance counters) are limited to the published profiles.
	published := slices.DeleteFunc(slices.Clone(m.Profiles), func(p gpu.MigProfile) bool { return !choice.publishes(p.Name) })
	max := m.MaxConcurrentUsage()
	var taken gpu.MigUsage
	adminCount := map[uint32]int{}
	for _, inst := range admin {
		if p, ok := m.ProfileByID(inst.ProfileID); ok {
			taken = taken.Add(p)
			adminCount[p.ID]++
		}
	}
	// The memory counter never binds harder than the memory slices: some
	// GPUs hold combinations whose nominal sizes add up to more than the
	// GPU's memory (3g.71gb twice on an H200).
	memory := max.MemoryBytes
	if g.MemoryBytes > memory {
		memory = g.MemoryBytes
	}
	counters := map[string]resourceapi.Counter{}
	put := func(name string, v int64) {
		if v > 0 {
			counters[name] = resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
		}
	}
	counters[CounterMemory] = resourceapi.Counter{Value: *resource.NewQuantity(int64(memory-minU(memory, taken.MemoryBytes)), resource.BinarySI)}
	put(CounterMultiprocessors, int64(max.Multiprocessors-taken.Multiprocessors))
	put(CounterCopyEngines, int64(max.CopyEngines-taken.CopyEngines))
	put(CounterDecoders, int64(max.Decoders-taken.Decoders))
	put(CounterEncoders, int64(max.Encoders-taken.Encoders))
	put(CounterJPEGEngines, int64(max.JPEGEngines-taken.JPEGEngines))
	put(CounterOFAEngines, int64(max.OFAEngines-taken.OFAEngines))
	for i := range m.MemorySlices {
		free := int64(1)
		for _, inst := range admin {
			if inst.Placement.Overlaps(gpu.MigPlacement{Start: i, Size: 1}) {
				free = 0
			}
		}
		put(MemorySliceCounter(i), free)
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
			if overlapsAny(pl, admin) {
				continue
			}
			d := migDevice(g, shared, p, pl, limited[p.ID], counters)
			d.Taints = healthTaints(driverName, health)
			out.placements = append(out.placements, d)
		}
	}
	return out, nil
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

func overlapsAny(pl gpu.MigPlacement, insts []gpu.MigInstance) bool {
	for _, inst := range insts {
		if pl.Overlaps(inst.Placement) {
			return true
		}
	}
	return false
}

// migAttributes is how many attributes a MIG placement has: 6 of its own
// and its GPU's shared ones (gpuAttributes).
const migAttributes = 6 + 11

// migDevice is one MIG placement as a device of type TypeMIG. It carries
// its own attributes and every attribute of its GPU that is true of it
// (gpuAttributes), so that selectors written for whole GPUs evaluate on
// it; not the GPU's uuid, index and minor, which name the GPU (the
// partition has parentUUID and parentIndex).
func migDevice(g gpu.GPU, shared gpuAttributes, p gpu.MigProfile, pl gpu.MigPlacement, limited bool, available map[string]resourceapi.Counter) resourceapi.Device {
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, migAttributes)
	attrs[AttrType] = stringAttr(TypeMIG)
	attrs[AttrProfile] = stringAttr(p.Name)
	attrs[AttrParentUUID] = stringAttr(g.UUID)
	attrs[AttrParentIndex] = intAttr(int64(g.Index))
	attrs[AttrPlacementStart] = intAttr(int64(pl.Start))
	attrs[AttrPlacementSize] = intAttr(int64(pl.Size))
	shared.into(attrs)
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
	use(CounterMemory, int64(p.MemoryBytes), resource.BinarySI)
	use(CounterMultiprocessors, int64(p.Multiprocessors), resource.DecimalSI)
	use(CounterCopyEngines, int64(p.CopyEngines), resource.DecimalSI)
	use(CounterDecoders, int64(p.Decoders), resource.DecimalSI)
	use(CounterEncoders, int64(p.Encoders), resource.DecimalSI)
	use(CounterJPEGEngines, int64(p.JPEGEngines), resource.DecimalSI)
	use(CounterOFAEngines, int64(p.OFAEngines), resource.DecimalSI)
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
