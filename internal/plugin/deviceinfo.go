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

package plugin

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// gpudra_device_info says, per device, who holds it. It is what a fleet
// map (node × GPU, by state, with pod and claim) and a join with DCGM
// exporter's metrics need: DCGM labels its series with the GPU's UUID (a
// MIG device's parent's) and the GPU instance ID, and knows nothing of
// gpudra's claims.

// Device states of gpudra_device_info.
const (
	stateFree        = "free"
	stateAllocated   = "allocated"
	stateShared      = "shared"
	statePartitioned = "partitioned"
	stateUnmanaged   = "unmanaged"
	stateUnhealthy   = "unhealthy"
)

// deviceInfo is one gpudra_device_info series.
type deviceInfo struct {
	device, typ, uuid string
	dcgmUUID, giID    string
	profile, model    string
	state             string
	namespace, claim  string
	pods              string
}

func (i deviceInfo) labels() []string {
	return []string{i.device, i.typ, i.uuid, i.dcgmUUID, i.giID, i.profile, i.model, i.state, i.namespace, i.claim, i.pods}
}

// deviceInfo lists every GPU of the node, once per claim that holds it
// (once when none does), and every MIG device prepared on it.
func (t *telemetry) deviceInfo() []deviceInfo {
	node := t.pub.currentNode()
	unhealthy := t.health.unhealthyGPUs()
	unmanaged := map[string]bool{}
	for uuid, instances := range t.pub.adminInstances() {
		unmanaged[uuid] = len(instances) > 0
	}
	t.mu.Lock()
	pods := maps.Clone(t.pods)
	t.mu.Unlock()
	whole, migs := gpuHolders(t.state.Claims(), pods)

	var out []deviceInfo
	for _, g := range node.GPUs {
		base := deviceInfo{device: g.DeviceName(), typ: "gpu", uuid: g.UUID, dcgmUUID: g.UUID, model: g.ProductName}
		held := whole[g.UUID]
		base.state = gpuState(unhealthy[g.UUID], len(migs[g.UUID]) > 0, unmanaged[g.UUID], held)
		if len(held) == 0 {
			out = append(out, base)
		}
		for _, h := range held {
			i := base
			i.namespace, i.claim, i.pods = h.claim.Namespace, h.claim.Name, pods[h.claim.UID]
			out = append(out, i)
		}
		for _, m := range migs[g.UUID] {
			m.model = g.ProductName
			if unhealthy[g.UUID] {
				m.state = stateUnhealthy
			}
			out = append(out, m)
		}
	}
	return out
}

// holding is a prepared claim that holds a GPU whole, or a share of it.
type holding struct {
	claim checkpoint.Claim
	share bool
}

// gpuHolders is who holds each GPU in the prepared claims: the claims
// that hold it whole or a share of it, and the MIG devices prepared on it
// (their series, but for the model), by GPU UUID. Admin access (a
// monitoring pod) holds nothing.
func gpuHolders(claims []checkpoint.Claim, pods map[string]string) (whole map[string][]holding, migs map[string][]deviceInfo) {
	whole, migs = map[string][]holding{}, map[string][]deviceInfo{}
	for _, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, dev := range c.Devices {
			if dev.AdminAccess || dev.Channel != nil {
				continue // an IMEX channel is no GPU
			}
			if dev.Mig == nil {
				// One series per claim, even for a claim that holds
				// two shares of one GPU (a registry refuses duplicates).
				held := whole[dev.GPUUUID]
				if i := slices.IndexFunc(held, func(h holding) bool { return h.claim.UID == c.UID }); i >= 0 {
					held[i].share = true
					continue
				}
				whole[dev.GPUUUID] = append(held, holding{claim: c, share: dev.ShareID != ""})
				continue
			}
			gi := ""
			if dev.Mig.GPUInstanceID != nil {
				gi = strconv.Itoa(*dev.Mig.GPUInstanceID)
			}
			migs[dev.GPUUUID] = append(migs[dev.GPUUUID], deviceInfo{
				device: dev.Device, typ: "mig", uuid: dev.Mig.UUID, dcgmUUID: dev.GPUUUID, giID: gi,
				profile: dev.Mig.Profile, state: stateAllocated,
				namespace: c.Namespace, claim: c.Name, pods: pods[c.UID],
			})
		}
	}
	return whole, migs
}

// gpuState is a GPU's state in gpudra_device_info, the first that holds
// of: unhealthy, partitioned (a MIG device is prepared on it), unmanaged
// (MIG instances gpudra did not create), shared, allocated, free.
func gpuState(unhealthy, partitioned, unmanaged bool, held []holding) string {
	switch {
	case unhealthy:
		return stateUnhealthy
	case partitioned:
		return statePartitioned
	case unmanaged:
		return stateUnmanaged
	case len(held) > 1 || len(held) == 1 && held[0].share:
		return stateShared
	case len(held) == 1:
		return stateAllocated
	default:
		return stateFree
	}
}
