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

// createCI creates a compute instance in a GPU instance, at pl or at the
// first free placement. The profile's instance count and the compute
// slices of existing compute instances limit what fits, and a request
// that does not fit is ERROR_INSUFFICIENT_RESOURCES.
func (g *fakeGPU) createCI(key giKey, info *nvml.ComputeInstanceProfileInfo, pl *nvml.ComputeInstancePlacement) (nvml.ComputeInstance, nvml.Return) {
	if info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	var created ciState
	ret := g.update(func(gs *gpuState) nvml.Return {
		gi, ok := lookupGI(gs, key)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		p, _ := g.model.mig.byID(gi.ProfileID)
		c, ok := p.computeByID(info.Id)
		if !ok {
			return nvml.ERROR_NOT_SUPPORTED
		}
		if pl != nil && !c.hasPlacement(*pl) {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		at, r := chooseCIPlacement(gi, c, pl)
		if r != nvml.SUCCESS {
			return r
		}
		used := make([]uint32, len(gi.ComputeInstances))
		for i, ci := range gi.ComputeInstances {
			used[i] = ci.ID
		}
		created = ciState{ID: lowestFreeID(used), ProfileID: c.info.Id, Start: at.Start, Size: at.Size}
		gi.ComputeInstances = append(gi.ComputeInstances, created)
		slices.SortFunc(gi.ComputeInstances, func(a, b ciState) int { return int(a.ID) - int(b.ID) })
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return g.ciHandle(key, created), nvml.SUCCESS
}

// chooseCIPlacement returns want if a new compute instance of c fits
// there, or the first placement of c that fits when want is nil.
func chooseCIPlacement(gi *giState, c *ciProfile, want *nvml.ComputeInstancePlacement) (nvml.ComputeInstancePlacement, nvml.Return) {
	same := 0
	for _, ci := range gi.ComputeInstances {
		if ci.ProfileID == c.info.Id {
			same++
		}
	}
	if same >= int(c.info.InstanceCount) {
		return nvml.ComputeInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	free := func(pl nvml.ComputeInstancePlacement) bool {
		for _, ci := range gi.ComputeInstances {
			if overlaps(pl.Start, pl.Size, ci.Start, ci.Size) {
				return false
			}
		}
		return true
	}
	if want != nil {
		if !free(*want) {
			return nvml.ComputeInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		return *want, nvml.SUCCESS
	}
	for _, pl := range c.placements {
		if free(pl) {
			return pl, nvml.SUCCESS
		}
	}
	return nvml.ComputeInstancePlacement{}, nvml.ERROR_INSUFFICIENT_RESOURCES
}

// ciHandle returns the handle of a compute instance.
func (g *fakeGPU) ciHandle(gk giKey, ci ciState) *server.ComputeInstance {
	key := ciKeyOf(gk, ci)
	return getOrBuild(&g.s.handles.mu, g.s.handles.cis, key, func() *server.ComputeInstance {
		h := &server.ComputeInstance{}
		g.installCI(h, key)
		g.complete(h)
		return h
	})
}

// installCI sets a compute instance handle's methods.
func (g *fakeGPU) installCI(h *server.ComputeInstance, key ciKey) {
	h.GetInfoFunc = func() (nvml.ComputeInstanceInfo, nvml.Return) {
		var info nvml.ComputeInstanceInfo
		ok := false
		if r := g.view(func(gs *gpuState) {
			gi, ci, found := lookupCI(gs, key)
			if !found {
				return
			}
			ok = true
			info = nvml.ComputeInstanceInfo{
				Device:      g.dev,
				GpuInstance: g.giHandle(*gi),
				Id:          ci.ID,
				ProfileId:   ci.ProfileID,
				Placement:   ci.placement(),
			}
		}); r != nvml.SUCCESS {
			return info, r
		}
		if !ok {
			return info, nvml.ERROR_INVALID_ARGUMENT
		}
		return info, nvml.SUCCESS
	}
	h.DestroyFunc = func() nvml.Return {
		return g.update(func(gs *gpuState) nvml.Return {
			gi, _, ok := lookupCI(gs, key)
			if !ok {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			gi.ComputeInstances = slices.DeleteFunc(gi.ComputeInstances, func(x ciState) bool { return x.ID == key.id })
			return nvml.SUCCESS
		})
	}
}
