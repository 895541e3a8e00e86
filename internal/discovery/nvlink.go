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

package discovery

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// nvlinkGroups returns, for each GPU, the lowest index of the GPUs it can
// reach over NVLink, directly or through others (NVSwitch boards connect
// all; PCIe cards none). A pair NVML cannot answer for counts as not
// connected: NVLink is an optimisation, not a reason to fail discovery.
func nvlinkGroups(ctx context.Context, devices []nvml.Device) []int {
	logger := klog.FromContext(ctx)
	parent := make([]int, len(devices))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for i := range devices {
		for j := i + 1; j < len(devices); j++ {
			status, ret := devices[i].GetP2PStatus(devices[j], nvml.P2P_CAPS_INDEX_NVLINK)
			if ret != nvml.SUCCESS {
				if ret != nvml.ERROR_NOT_SUPPORTED {
					logger.V(2).Info("Cannot query NVLink between GPUs; treating them as unconnected", "gpu", i, "peer", j, "err", ret)
				}
				continue
			}
			if status != nvml.P2P_STATUS_OK {
				continue
			}
			// Hang the higher root under the lower, so every root is its
			// component's lowest index.
			a, b := find(i), find(j)
			parent[max(a, b)] = min(a, b)
		}
	}
	groups := make([]int, len(devices))
	for i := range groups {
		groups[i] = find(i)
	}
	return groups
}
