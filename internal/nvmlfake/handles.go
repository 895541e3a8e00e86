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
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// A GPU instance is identified by its GPU, ID, profile and placement: an
// ID reused for a different instance is a different instance, and a
// handle to the old one is stale (ERROR_INVALID_ARGUMENT), as on
// hardware.
type giKey struct {
	gpu                  int
	id, profileID, start uint32
}

// ciKey identifies a compute instance, and the MIG device it is.
type ciKey struct {
	gi                   giKey
	id, profileID, start uint32
}

func (g *fakeGPU) giKey(gi giState) giKey {
	return giKey{gpu: g.index, id: gi.ID, profileID: gi.ProfileID, start: gi.Start}
}

func ciKeyOf(gi giKey, ci ciState) ciKey {
	return ciKey{gi: gi, id: ci.ID, profileID: ci.ProfileID, start: ci.Start}
}

// handleCache hands out one handle per instance, so that handles compare
// equal as long as the instance lives, like NVML's.
type handleCache struct {
	mu   sync.Mutex
	gis  map[giKey]*server.GpuInstance
	cis  map[ciKey]*server.ComputeInstance
	migs map[ciKey]*mock.Device
}

func (h *handleCache) init() {
	h.gis = map[giKey]*server.GpuInstance{}
	h.cis = map[ciKey]*server.ComputeInstance{}
	h.migs = map[ciKey]*mock.Device{}
}

// getOrBuild returns m[key], building and storing it first if needed.
func getOrBuild[K comparable, V any](mu *sync.Mutex, m map[K]V, key K, build func() V) V {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := m[key]; ok {
		return v
	}
	v := build()
	m[key] = v
	return v
}

// lookupGI finds the live GPU instance key names, if it still exists.
func lookupGI(gs *gpuState, key giKey) (*giState, bool) {
	gi, ok := gs.gi(key.id)
	if !ok || gi.ProfileID != key.profileID || gi.Start != key.start {
		return nil, false
	}
	return gi, true
}

// lookupCI finds the live compute instance key names, if it still exists.
func lookupCI(gs *gpuState, key ciKey) (*giState, *ciState, bool) {
	gi, ok := lookupGI(gs, key.gi)
	if !ok {
		return nil, nil, false
	}
	ci, ok := gi.ci(key.id)
	if !ok || ci.ProfileID != key.profileID || ci.Start != key.start {
		return nil, nil, false
	}
	return gi, ci, true
}
