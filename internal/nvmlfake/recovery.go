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
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// After an XID the driver says what it takes to make the GPU usable again:
// nvmlDeviceGetFieldValues with NVML_FI_DEV_GET_GPU_RECOVERY_ACTION reports
// an nvmlDeviceGpuRecoveryAction_t (NONE, GPU_RESET, NODE_REBOOT, ...;
// NVML reference, "Field Value Queries", and the enum's documentation in
// NVIDIA's cuda-python bindings), and NONE once nothing is needed. The
// kubelet plugin reads it to clear a GPU's health taint without a restart.
//
// The fake models it from the XID: an XID an application causes needs
// nothing; XID 79 (the GPU fell off the bus) needs a node reboot, and the
// GPU is lost from then on (every call on it answers ERROR_GPU_IS_LOST,
// see lost.go), as on real hardware, where XID 79 is the driver's report
// of exactly that; any other needs a GPU reset. The action is kept in the state file with the GPU, so
// every process sees it, and a GPU reset (ResetGPU) or a reboot clears it.
// Real drivers are finer-grained (some XIDs ask to drain peer-to-peer
// traffic first); what the plugin relies on is only that the action is
// NONE once the GPU is fit again.

// applicationXIDs are XIDs an application causes: the GPU needs nothing.
// The list is the one NVIDIA's device plugin skips.
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// recoveryAfter is the action the driver asks for after an XID.
func recoveryAfter(xid uint64) nvml.DeviceGpuRecoveryAction {
	switch {
	case applicationXIDs[xid]:
		return nvml.GPU_RECOVERY_ACTION_NONE
	case xid == xidFallenOffTheBus:
		return nvml.GPU_RECOVERY_ACTION_NODE_REBOOT
	default:
		return nvml.GPU_RECOVERY_ACTION_GPU_RESET
	}
}

// recordRecovery raises the recovery action of the GPU an XID on uuid (a
// GPU-… or MIG-… UUID) concerns; an action already pending that asks for
// more is kept. A UUID the state does not know is left alone: the XID log
// takes any. It returns the UUID of the GPU whose action changed ("" when
// none did): the driver then reports a recovery-action event for it.
func recordRecovery(st *state, uuid string, xid uint64) string {
	action := recoveryAfter(xid)
	if action == nvml.GPU_RECOVERY_ACTION_NONE {
		return ""
	}
	gpuUUID, gs := uuid, st.GPUs[uuid]
	if gs == nil {
		gpuUUID, gs = parentOfMIG(st, uuid)
	}
	if gs == nil {
		return ""
	}
	if xid == xidFallenOffTheBus {
		gs.Lost = true
	}
	if action > nvml.DeviceGpuRecoveryAction(gs.RecoveryAction) {
		gs.RecoveryAction = int(action)
		return gpuUUID
	}
	return ""
}

// parentOfMIG finds the GPU that holds the MIG device with the given UUID
// (nil when none does).
func parentOfMIG(st *state, uuid string) (string, *gpuState) {
	for gpuUUID, gs := range st.GPUs {
		for _, gi := range gs.GpuInstances {
			for _, ci := range gi.ComputeInstances {
				if migUUID(gpuUUID, gi, ci) == uuid {
					return gpuUUID, gs
				}
			}
		}
	}
	return "", nil
}

// installRecovery makes the GPU answer the recovery-action field.
func (g *fakeGPU) installRecovery() {
	g.dev.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		action := 0
		if r := g.view(func(gs *gpuState) { action = gs.RecoveryAction }); r != nvml.SUCCESS {
			return r
		}
		for i := range values {
			v := &values[i]
			if v.FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
				v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			v.NvmlReturn = uint32(nvml.SUCCESS)
			v.Value = [8]byte{}
			binary.NativeEndian.PutUint32(v.Value[:4], uint32(action))
		}
		return nvml.SUCCESS
	}
}
