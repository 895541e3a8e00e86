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

package nvmlfake

import (
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// installGpuInstances sets the device methods that list, create and find
// GPU instances.
func (g *fakeGPU) installGpuInstances() {
	d := g.dev
	d.GetGpuInstanceProfileInfoFunc = g.giProfileInfo
	d.GetGpuInstancePossiblePlacementsFunc = g.giPossiblePlacements
	d.GetGpuInstanceRemainingCapacityFunc = g.giRemainingCapacity
	d.CreateGpuInstanceFunc = func(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		return g.createGI(info, nil)
	}
	d.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		if pl == nil {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.createGI(info, pl)
	}
	d.GetGpuInstancesFunc = g.gpuInstances
	d.GetGpuInstanceByIdFunc = g.gpuInstanceByID
}

// giProfileInfo takes a profile index (NVML_GPU_INSTANCE_PROFILE_*) and
// answers whether or not MIG is on, as NVML does.
func (g *fakeGPU) giProfileInfo(index int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if g.model.mig == nil {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	if index < 0 || index >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	p, ok := g.model.mig.byIndex(index)
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return p.info, nvml.SUCCESS
}

// profileOf resolves info.Id, which (unlike GetGpuInstanceProfileInfo's
// argument) is a profile ID, not an index.
func (g *fakeGPU) profileOf(info *nvml.GpuInstanceProfileInfo) (*giProfile, nvml.Return) {
	if g.model.mig == nil {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	p, ok := g.model.mig.byID(info.Id)
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return p, nvml.SUCCESS
}

// giPossiblePlacements lists every placement of a profile, whether or not
// MIG is on and whatever is free.
func (g *fakeGPU) giPossiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	p, ret := g.profileOf(info)
	if ret == nvml.ERROR_INVALID_ARGUMENT && info != nil {
		ret = nvml.ERROR_NOT_SUPPORTED // an unknown profile ID is "not supported" here
	}
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return slices.Clone(p.placements), nvml.SUCCESS
}

// giRemainingCapacity is how many more instances of the profile could be
// created, one after another, from the current state.
func (g *fakeGPU) giRemainingCapacity(info *nvml.GpuInstanceProfileInfo) (int, nvml.Return) {
	p, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	n, inner := 0, nvml.SUCCESS
	if r := g.view(func(gs *gpuState) {
		if gs.MigMode != nvml.DEVICE_MIG_ENABLE {
			inner = nvml.ERROR_NOT_SUPPORTED
			return
		}
		sim := *gs
		sim.GpuInstances = slices.Clone(gs.GpuInstances)
		for {
			pl, r := g.choosePlacement(&sim, p, nil)
			if r != nvml.SUCCESS {
				return
			}
			sim.GpuInstances = append(sim.GpuInstances, giState{ProfileID: p.info.Id, Start: pl.Start, Size: pl.Size})
			n++
		}
	}); r != nvml.SUCCESS {
		return 0, r
	}
	return n, inner
}

// createGI creates a GPU instance at pl, or at the first free placement
// when pl is nil. MIG must be on; the profile's instance count, the
// memory slices of existing instances and the GPU's compute slices all
// limit what fits, and a request that does not fit is
// ERROR_INSUFFICIENT_RESOURCES.
func (g *fakeGPU) createGI(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	p, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if pl != nil && !p.hasPlacement(*pl) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	var created giState
	ret = g.update(func(gs *gpuState) nvml.Return {
		if gs.MigMode != nvml.DEVICE_MIG_ENABLE {
			return nvml.ERROR_NOT_SUPPORTED
		}
		at, r := g.choosePlacement(gs, p, pl)
		if r != nvml.SUCCESS {
			return r
		}
		used := make([]uint32, len(gs.GpuInstances))
		for i, gi := range gs.GpuInstances {
			used[i] = gi.ID
		}
		created = giState{ID: lowestFreeID(used), ProfileID: p.info.Id, Start: at.Start, Size: at.Size}
		gs.GpuInstances = append(gs.GpuInstances, created)
		slices.SortFunc(gs.GpuInstances, func(a, b giState) int { return int(a.ID) - int(b.ID) })
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return g.giHandle(created), nvml.SUCCESS
}

// choosePlacement returns want if a new instance of p fits there, or the
// first placement of p that fits when want is nil.
func (g *fakeGPU) choosePlacement(gs *gpuState, p *giProfile, want *nvml.GpuInstancePlacement) (nvml.GpuInstancePlacement, nvml.Return) {
	t := g.model.mig
	same, computeUsed := 0, uint32(0)
	for _, gi := range gs.GpuInstances {
		if gi.ProfileID == p.info.Id {
			same++
		}
		if q, ok := t.byID(gi.ProfileID); ok {
			computeUsed += q.info.SliceCount
		}
	}
	if same >= int(p.info.InstanceCount) || computeUsed+p.info.SliceCount > t.computeSlices {
		return nvml.GpuInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	free := func(pl nvml.GpuInstancePlacement) bool {
		for _, gi := range gs.GpuInstances {
			if overlaps(pl.Start, pl.Size, gi.Start, gi.Size) {
				return false
			}
		}
		return true
	}
	if want != nil {
		if !free(*want) {
			return nvml.GpuInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		return *want, nvml.SUCCESS
	}
	for _, pl := range p.placements {
		if free(pl) {
			return pl, nvml.SUCCESS
		}
	}
	return nvml.GpuInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
}

// overlaps reports whether [aStart, aStart+aSize) and [bStart,
// bStart+bSize) share a slice.
func overlaps(aStart, aSize, bStart, bSize uint32) bool {
	return aStart < bStart+bSize && bStart < aStart+aSize
}

// gpuInstances lists the GPU instances of one profile, in ID order. Like
// go-nvml's wrapper, it sizes its buffer by info.InstanceCount, so a
// hand-made info without it fails as it does on hardware.
func (g *fakeGPU) gpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	if info != nil && info.InstanceCount == 0 {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	p, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	var found []giState
	inner := nvml.SUCCESS
	if r := g.view(func(gs *gpuState) {
		if gs.MigMode != nvml.DEVICE_MIG_ENABLE {
			inner = nvml.ERROR_NOT_SUPPORTED
			return
		}
		for _, gi := range gs.GpuInstances {
			if gi.ProfileID == p.info.Id {
				found = append(found, gi)
			}
		}
	}); r != nvml.SUCCESS {
		return nil, r
	}
	if inner != nvml.SUCCESS {
		return nil, inner
	}
	out := make([]nvml.GpuInstance, len(found))
	for i, gi := range found {
		out[i] = g.giHandle(gi)
	}
	return out, nvml.SUCCESS
}

// gpuInstanceByID finds a GPU instance by ID.
func (g *fakeGPU) gpuInstanceByID(id int) (nvml.GpuInstance, nvml.Return) {
	if g.model.mig == nil {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	var found *giState
	ret := nvml.SUCCESS
	if r := g.view(func(gs *gpuState) {
		if gs.MigMode != nvml.DEVICE_MIG_ENABLE {
			ret = nvml.ERROR_NOT_SUPPORTED
			return
		}
		if id < 0 {
			ret = nvml.ERROR_INVALID_ARGUMENT
			return
		}
		if gi, ok := gs.gi(uint32(id)); ok {
			c := *gi
			found = &c
		}
	}); r != nvml.SUCCESS {
		return nil, r
	}
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if found == nil {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return g.giHandle(*found), nvml.SUCCESS
}
