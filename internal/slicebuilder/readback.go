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
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Placement is where a published MIG placement lies on its GPU, in memory
// slices: its first from its name, its size from the memory slices it
// consumes (its attributes do not repeat them). ok is false for a device
// that is not a MIG placement.
func Placement(d resourceapi.Device) (start, size int, ok bool) {
	p, ok := gpu.ParseDeviceName(d.Name)
	if !ok || !p.MIG {
		return 0, 0, false
	}
	for _, cc := range d.ConsumesCounters {
		for name := range cc.Counters {
			if strings.HasPrefix(name, "memory-slice-") {
				size++
			}
		}
	}
	return p.Start, size, true
}

// NodeOf reads the devices of one pool, as Build published them for the
// driver, back into the device model: each GPU (from its whole device,
// its monitoring device or its MIG placements, whichever are published),
// with its UUID, memory and multiprocessors, and for each MIG profile the
// placements published (from their names and the memory slices they
// consume). It is what gpudra check hands to the prepare-time
// checks (internal/claimplan) for ResourceSlices it did not build itself, e.g.
// a cluster's: the names resolve exactly as the plugin resolves them on
// its node. Pass only the devices of gpudra's driver.
func NodeOf(pool string, devices []resourceapi.Device) gpu.Node {
	byMinor := map[int]*gpu.GPU{}
	gpuOf := func(minor int) *gpu.GPU {
		g, ok := byMinor[minor]
		if !ok {
			g = &gpu.GPU{Minor: minor, Index: -1}
			byMinor[minor] = g
		}
		return g
	}
	str := func(d resourceapi.Device, name resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	num := func(d resourceapi.Device, name resourceapi.QualifiedName) (int, bool) {
		if a, ok := d.Attributes[name]; ok && a.IntValue != nil {
			return int(*a.IntValue), true
		}
		return 0, false
	}
	capOf := func(d resourceapi.Device, name resourceapi.QualifiedName) int64 {
		if c, ok := d.Capacity[name]; ok {
			return c.Value.Value()
		}
		return 0
	}
	for _, d := range devices {
		p, ok := gpu.ParseDeviceName(d.Name)
		if !ok {
			continue
		}
		g := gpuOf(p.Minor)
		switch typ := str(d, AttrType); {
		case !p.MIG && (typ == TypeGPU || typ == TypeMonitor):
			g.UUID = str(d, AttrUUID)
			g.ProductName = str(d, AttrProductName)
			g.MemoryBytes = uint64(max(capOf(d, CapMemory), 0))
			g.Multiprocessors = int(capOf(d, CapMultiprocessors))
			if i, ok := num(d, AttrIndex); ok {
				g.Index = i
			}
		case p.MIG && typ == TypeMIG:
			if g.UUID == "" {
				g.UUID = str(d, AttrParentUUID)
			}
			// A placement is published by its name and the memory slices
			// it consumes (its attributes do not repeat them).
			start, size, _ := Placement(d)
			if g.MIG == nil {
				g.MIG = &gpu.MIG{}
				g.MigCapable, g.MigEnabled = true, true
			}
			name := str(d, AttrProfile)
			i := sort.Search(len(g.MIG.Profiles), func(i int) bool { return g.MIG.Profiles[i].Name >= name })
			if i == len(g.MIG.Profiles) || g.MIG.Profiles[i].Name != name {
				g.MIG.Profiles = append(g.MIG.Profiles, gpu.MigProfile{})
				copy(g.MIG.Profiles[i+1:], g.MIG.Profiles[i:])
				g.MIG.Profiles[i] = gpu.MigProfile{Name: name,
					MemoryBytes: uint64(max(capOf(d, CapMemory), 0)), Multiprocessors: int(capOf(d, CapMultiprocessors))}
			}
			g.MIG.Profiles[i].Placements = append(g.MIG.Profiles[i].Placements, gpu.MigPlacement{Start: start, Size: size})
		}
	}
	node := gpu.Node{Name: pool}
	for _, g := range byMinor {
		node.GPUs = append(node.GPUs, *g)
	}
	sort.Slice(node.GPUs, func(i, j int) bool { return node.GPUs[i].Minor < node.GPUs[j].Minor })
	return node
}
