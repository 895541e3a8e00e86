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
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/uuid"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
)

// fabricSymbolV4 and fabricSymbolV are the newer fabric-info entry points;
// a driver older than each lacks its symbol, and go-nvml calls a missing
// symbol without checking, so each is looked up first.
const (
	fabricSymbolV4 = "nvmlDeviceGetGpuFabricInfo_v4"
	fabricSymbolV  = "nvmlDeviceGetGpuFabricInfoV"
)

// fabric reads the GPU's multi-node NVLink fabric: _v4 where the driver
// has it (R580 and later), else the V form (v3, then v2 for a driver that
// refuses v3), else v1. NOT_SUPPORTED is a GPU outside any fabric; any
// other failure but a lost GPU is recorded as FabricUnknown, so that a
// flaky fabric query keeps the node out of its domain without failing
// discovery.
func fabric(ctx context.Context, lib nvml.Interface, d nvml.Device) (gpu.Fabric, error) {
	has := func(symbol string) bool { return lib.Extensions().LookupSymbol(symbol) == nil }
	var (
		f   gpu.Fabric
		ret nvml.Return
	)
	switch {
	case has(fabricSymbolV4):
		var info nvml.GpuFabricInfo_v4
		info, ret = d.GetGpuFabricInfo_v4()
		f = fabricOf(info.State, info.Status, info.ClusterUuid, firstUnicastClique(info), info.HealthSummary)
	case has(fabricSymbolV):
		var info nvml.GpuFabricInfo_v3
		info, ret = d.GetGpuFabricInfoV().V3()
		if ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH {
			var v2 nvml.GpuFabricInfo_v2
			v2, ret = d.GetGpuFabricInfoV().V2()
			info = nvml.GpuFabricInfo_v3{ClusterUuid: v2.ClusterUuid, Status: v2.Status, CliqueId: v2.CliqueId, State: v2.State}
		}
		f = fabricOf(info.State, info.Status, info.ClusterUuid, info.CliqueId, info.HealthSummary)
	default:
		var info nvml.GpuFabricInfo
		info, ret = d.GetGpuFabricInfo()
		f = fabricOf(info.State, info.Status, info.ClusterUuid, info.CliqueId, nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED)
	}
	switch ret {
	case nvml.SUCCESS:
		return f, nil
	case nvml.ERROR_NOT_SUPPORTED:
		return gpu.Fabric{State: gpu.FabricNotSupported}, nil
	case nvml.ERROR_GPU_IS_LOST:
		return gpu.Fabric{}, fmt.Errorf("get fabric info: %w", ret)
	default:
		klog.FromContext(ctx).Error(ret, "Cannot read the GPU's NVLink fabric; it counts as outside any NVLink domain")
		return gpu.Fabric{State: gpu.FabricUnknown, Status: ret.Error()}, nil
	}
}

// firstUnicastClique is the v3 cliqueId in a v4 reading: nvml.h, "The
// legacy v3 cliqueId maps to the id of the first
// NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER entry".
func firstUnicastClique(info nvml.GpuFabricInfo_v4) uint32 {
	for i := range min(int(info.NumCliques), len(info.Cliques)) {
		if info.Cliques[i].Type == nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER {
			return info.Cliques[i].Id
		}
	}
	return 0
}

func fabricOf(state uint8, status uint32, cluster [nvml.GPU_FABRIC_UUID_LEN]uint8, clique uint32, health uint8) gpu.Fabric {
	f := gpu.Fabric{ClusterUUID: uuid.UUID(cluster).String(), CliqueID: clique}
	switch state {
	case nvml.GPU_FABRIC_STATE_NOT_STARTED:
		f.State = gpu.FabricNotStarted
	case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		f.State = gpu.FabricInProgress
	case nvml.GPU_FABRIC_STATE_COMPLETED:
		f.State = gpu.FabricCompleted
	default:
		f.State = gpu.FabricNotSupported
	}
	if r := nvml.Return(status); r == nvml.SUCCESS {
		f.Status = "SUCCESS"
	} else {
		f.Status = r.Error()
	}
	switch health {
	case nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY:
		f.Health = gpu.FabricHealthy
	case nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY:
		f.Health = gpu.FabricUnhealthy
	case nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY:
		f.Health = gpu.FabricLimitedCapacity
	}
	return f
}

// platform reads where the GPU sits in its rack and on its board. Neither
// is a reason to fail discovery: a GPU that cannot say is published
// without them.
func platform(ctx context.Context, d nvml.Device) (gpu.Platform, error) {
	var p gpu.Platform
	info, ret := d.GetPlatformInfo()
	switch ret {
	case nvml.SUCCESS:
		p = gpu.Platform{
			Known:         true,
			ChassisSerial: cBytes(info.ChassisSerialNumber[:]),
			SlotNumber:    int(info.SlotNumber),
			TrayIndex:     int(info.TrayIndex),
			HostID:        int(info.HostId),
			ModuleID:      int(info.ModuleId),
			ModuleIDKnown: true,
		}
	case nvml.ERROR_NOT_SUPPORTED:
	case nvml.ERROR_GPU_IS_LOST:
		return p, fmt.Errorf("get platform info: %w", ret)
	default:
		klog.FromContext(ctx).V(2).Info("Cannot read the GPU's platform info; publishing it without", "err", ret)
	}
	if !p.ModuleIDKnown {
		id, ret := d.GetModuleId()
		switch ret {
		case nvml.SUCCESS:
			p.ModuleID, p.ModuleIDKnown = id, true
		case nvml.ERROR_GPU_IS_LOST:
			return p, fmt.Errorf("get module ID: %w", ret)
		}
	}
	return p, nil
}

// cBytes is a NUL-terminated byte array as a string.
func cBytes(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// fabricAndPlatform fills both into g.
func fabricAndPlatform(ctx context.Context, lib nvml.Interface, d nvml.Device, g *gpu.GPU) error {
	var err1, err2 error
	g.Fabric, err1 = fabric(ctx, lib, d)
	g.Platform, err2 = platform(ctx, d)
	return errors.Join(err1, err2)
}

// RefreshFabric returns node with every GPU's fabric and platform read
// again: the fabric manager changes them while the node runs (a probe
// finishing, a clique moved by NMX, a fabric turning unhealthy). A GPU
// that cannot be reached keeps its last reading; its health is the health
// watch's business.
func RefreshFabric(ctx context.Context, lib nvml.Interface, node gpu.Node) gpu.Node {
	logger := klog.FromContext(ctx)
	out := node
	out.GPUs = make([]gpu.GPU, len(node.GPUs))
	for i, g := range node.GPUs {
		out.GPUs[i] = g
		d, ret := lib.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			logger.V(2).Info("Cannot reach the GPU to read its NVLink fabric; keeping its last reading", "gpu", g.UUID, "err", ret)
			continue
		}
		if err := fabricAndPlatform(ctx, lib, d, &out.GPUs[i]); err != nil {
			logger.V(2).Info("Cannot read the GPU's NVLink fabric; keeping its last reading", "gpu", g.UUID, "err", err)
			out.GPUs[i] = g
		}
	}
	return out
}
