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
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// giHandle returns the handle of a GPU instance.
func (g *fakeGPU) giHandle(gi giState) *server.GpuInstance {
	key := g.giKey(gi)
	return getOrBuild(&g.s.handles.mu, g.s.handles.gis, key, func() *server.GpuInstance {
		h := &server.GpuInstance{Info: nvml.GpuInstanceInfo{
			Device: g.dev, Id: gi.ID, ProfileId: gi.ProfileID, Placement: gi.placement(),
		}}
		g.installGI(h, key)
		g.complete(h)
		return h
	})
}

// withGI calls fn with the live GPU instance key names and its profile,
// or answers ERROR_INVALID_ARGUMENT for a destroyed one.
func (g *fakeGPU) withGI(key giKey, fn func(gs *gpuState, gi *giState, p *giProfile)) nvml.Return {
	ret := nvml.SUCCESS
	if r := g.view(func(gs *gpuState) {
		gi, ok := lookupGI(gs, key)
		if !ok {
			ret = nvml.ERROR_INVALID_ARGUMENT
			return
		}
		p, _ := g.model.mig.byID(gi.ProfileID)
		fn(gs, gi, p)
	}); r != nvml.SUCCESS {
		return r
	}
	return ret
}

// installGI sets a GPU instance handle's methods.
func (g *fakeGPU) installGI(h *server.GpuInstance, key giKey) {
	h.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
		var info nvml.GpuInstanceInfo
		ret := g.withGI(key, func(_ *gpuState, gi *giState, _ *giProfile) {
			info = nvml.GpuInstanceInfo{Device: g.dev, Id: gi.ID, ProfileId: gi.ProfileID, Placement: gi.placement()}
		})
		return info, ret
	}
	h.DestroyFunc = func() nvml.Return {
		return g.update(func(gs *gpuState) nvml.Return {
			gi, ok := lookupGI(gs, key)
			if !ok {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			if len(gi.ComputeInstances) > 0 {
				return nvml.ERROR_IN_USE
			}
			gs.GpuInstances = slices.DeleteFunc(gs.GpuInstances, func(x giState) bool { return x.ID == key.id })
			return nvml.SUCCESS
		})
	}
	h.GetComputeInstanceProfileInfoFunc = func(profile, engProfile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		var info nvml.ComputeInstanceProfileInfo
		ret := nvml.SUCCESS
		if r := g.withGI(key, func(_ *gpuState, _ *giState, p *giProfile) {
			switch {
			case profile < 0 || profile >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT,
				engProfile < 0 || engProfile >= nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT:
				ret = nvml.ERROR_INVALID_ARGUMENT
			default:
				ci, ok := p.computeProfiles[profile]
				if !ok {
					ret = nvml.ERROR_NOT_SUPPORTED
					return
				}
				info = ci.info
			}
		}); r != nvml.SUCCESS {
			return info, r
		}
		return info, ret
	}
	h.GetComputeInstancePossiblePlacementsFunc = func(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstancePlacement, nvml.Return) {
		var out []nvml.ComputeInstancePlacement
		ret := g.withCIProfile(key, info, func(_ *giState, c *ciProfile) nvml.Return {
			out = slices.Clone(c.placements)
			return nvml.SUCCESS
		})
		return out, ret
	}
	h.GetComputeInstanceRemainingCapacityFunc = func(info *nvml.ComputeInstanceProfileInfo) (int, nvml.Return) {
		n := 0
		ret := g.withCIProfile(key, info, func(gi *giState, c *ciProfile) nvml.Return {
			sim := *gi
			sim.ComputeInstances = slices.Clone(gi.ComputeInstances)
			for {
				pl, r := chooseCIPlacement(&sim, c, nil)
				if r != nvml.SUCCESS {
					return nvml.SUCCESS
				}
				sim.ComputeInstances = append(sim.ComputeInstances, ciState{ProfileID: c.info.Id, Start: pl.Start, Size: pl.Size})
				n++
			}
		})
		return n, ret
	}
	h.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		return g.createCI(key, info, nil)
	}
	h.CreateComputeInstanceWithPlacementFunc = func(info *nvml.ComputeInstanceProfileInfo, pl *nvml.ComputeInstancePlacement) (nvml.ComputeInstance, nvml.Return) {
		if pl == nil {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.createCI(key, info, pl)
	}
	h.GetComputeInstancesFunc = func(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
		if info != nil && info.InstanceCount == 0 {
			return nil, nvml.ERROR_INVALID_ARGUMENT // go-nvml sizes its buffer by it
		}
		var found []ciState
		ret := g.withCIProfile(key, info, func(gi *giState, c *ciProfile) nvml.Return {
			for _, ci := range gi.ComputeInstances {
				if ci.ProfileID == c.info.Id {
					found = append(found, ci)
				}
			}
			return nvml.SUCCESS
		})
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		out := make([]nvml.ComputeInstance, len(found))
		for i, ci := range found {
			out[i] = g.ciHandle(key, ci)
		}
		return out, nvml.SUCCESS
	}
	h.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		var found *ciState
		if ret := g.withGI(key, func(_ *gpuState, gi *giState, _ *giProfile) {
			if ci, ok := gi.ci(uint32(id)); ok && id >= 0 {
				c := *ci
				found = &c
			}
		}); ret != nvml.SUCCESS {
			return nil, ret
		}
		if found == nil {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return g.ciHandle(key, *found), nvml.SUCCESS
	}
}

// withCIProfile resolves a compute instance profile ID within a live GPU
// instance; an unknown one is ERROR_NOT_SUPPORTED.
func (g *fakeGPU) withCIProfile(key giKey, info *nvml.ComputeInstanceProfileInfo, fn func(gi *giState, c *ciProfile) nvml.Return) nvml.Return {
	if info == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	ret := nvml.SUCCESS
	if r := g.withGI(key, func(_ *gpuState, gi *giState, p *giProfile) {
		c, ok := p.computeByID(info.Id)
		if !ok {
			ret = nvml.ERROR_NOT_SUPPORTED
			return
		}
		ret = fn(gi, c)
	}); r != nvml.SUCCESS {
		return r
	}
	return ret
}
