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
	m := giMethods{g: g, key: key}
	h.GetInfoFunc = m.info
	h.DestroyFunc = m.destroy
	h.GetComputeInstanceProfileInfoFunc = m.ciProfileInfo
	h.GetComputeInstancePossiblePlacementsFunc = m.ciPlacements
	h.GetComputeInstanceRemainingCapacityFunc = m.ciRemainingCapacity
	h.CreateComputeInstanceFunc = m.createCI
	h.CreateComputeInstanceWithPlacementFunc = m.createCIAt
	h.GetComputeInstancesFunc = m.computeInstances
	h.GetComputeInstanceByIdFunc = m.computeInstanceByID
}

// giMethods are a GPU instance handle's methods: each looks up the
// instance key names in the GPU's state, where it may be gone.
type giMethods struct {
	g   *fakeGPU
	key giKey
}

// info is the instance's GetInfo.
func (m giMethods) info() (nvml.GpuInstanceInfo, nvml.Return) {
	var info nvml.GpuInstanceInfo
	ret := m.g.withGI(m.key, func(_ *gpuState, gi *giState, _ *giProfile) {
		info = nvml.GpuInstanceInfo{Device: m.g.dev, Id: gi.ID, ProfileId: gi.ProfileID, Placement: gi.placement()}
	})
	return info, ret
}

// destroy destroys the instance, unless it has compute instances.
func (m giMethods) destroy() nvml.Return {
	return m.g.update(func(gs *gpuState) nvml.Return {
		gi, ok := lookupGI(gs, m.key)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if len(gi.ComputeInstances) > 0 {
			return nvml.ERROR_IN_USE
		}
		gs.GpuInstances = slices.DeleteFunc(gs.GpuInstances, func(x giState) bool { return x.ID == m.key.id })
		return nvml.SUCCESS
	})
}

// ciProfileInfo is a compute instance profile of the instance's profile.
func (m giMethods) ciProfileInfo(profile, engProfile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	var info nvml.ComputeInstanceProfileInfo
	ret := nvml.SUCCESS
	if r := m.g.withGI(m.key, func(_ *gpuState, _ *giState, p *giProfile) {
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

// ciPlacements are where a compute instance of the profile may go.
func (m giMethods) ciPlacements(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstancePlacement, nvml.Return) {
	var out []nvml.ComputeInstancePlacement
	ret := m.g.withCIProfile(m.key, info, func(_ *giState, c *ciProfile) nvml.Return {
		out = slices.Clone(c.placements)
		return nvml.SUCCESS
	})
	return out, ret
}

// ciRemainingCapacity counts how many more compute instances of the
// profile fit, placing them one by one on a copy of the instance.
func (m giMethods) ciRemainingCapacity(info *nvml.ComputeInstanceProfileInfo) (int, nvml.Return) {
	n := 0
	ret := m.g.withCIProfile(m.key, info, func(gi *giState, c *ciProfile) nvml.Return {
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

// createCI creates a compute instance where the profile's first free
// placement is.
func (m giMethods) createCI(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	return m.g.createCI(m.key, info, nil)
}

// createCIAt creates a compute instance at a placement.
func (m giMethods) createCIAt(info *nvml.ComputeInstanceProfileInfo, pl *nvml.ComputeInstancePlacement) (nvml.ComputeInstance, nvml.Return) {
	if pl == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return m.g.createCI(m.key, info, pl)
}

// computeInstances are the instance's compute instances of a profile.
func (m giMethods) computeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	if info != nil && info.InstanceCount == 0 {
		return nil, nvml.ERROR_INVALID_ARGUMENT // go-nvml sizes its buffer by it
	}
	var found []ciState
	ret := m.g.withCIProfile(m.key, info, func(gi *giState, c *ciProfile) nvml.Return {
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
		out[i] = m.g.ciHandle(m.key, ci)
	}
	return out, nvml.SUCCESS
}

// computeInstanceByID is one of the instance's compute instances.
func (m giMethods) computeInstanceByID(id int) (nvml.ComputeInstance, nvml.Return) {
	var found *ciState
	if ret := m.g.withGI(m.key, func(_ *gpuState, gi *giState, _ *giProfile) {
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
	return m.g.ciHandle(m.key, *found), nvml.SUCCESS
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
