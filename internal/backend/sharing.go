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

package backend

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Sharing operations on whole GPUs. The compute mode goes through NVML for
// both backends. The time slice does not: NVML has no call for the
// compute policy ("nvidia-smi compute-policy --set-timeslice" is the only
// interface NVIDIA offers, and NVIDIA's own DRA driver runs it), so each
// backend brings its own (policyTools).

// policyTools are the sharing operations NVML lacks, per backend.
type policyTools interface {
	// setTimeSlice sets the GPU's time-slice level, 0 (default) to 3.
	setTimeSlice(uuid string, level int) error
	// mpsDaemon is how to run an MPS control daemon for the device with
	// the given UUID (a GPU's or a MIG device's).
	mpsDaemon(deviceUUID string) gpu.DaemonCommand
	// imexCtl is how to run nvidia-imex-ctl, the IMEX daemon's control
	// client (docs/nvlink.md): the command and its environment.
	imexCtl() gpu.ToolCommand
}

// ComputeMode reports the GPU's compute mode.
func (l library) ComputeMode(uuid string) (gpu.ComputeMode, error) {
	d, err := l.device(uuid)
	if err != nil {
		return 0, err
	}
	m, ret := d.GetComputeMode()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s: get compute mode: %w", uuid, ret)
	}
	return gpu.ComputeMode(m), nil
}

// SetComputeMode sets the GPU's compute mode. NVML refuses anything but
// Default on a GPU in MIG mode (ERROR_NOT_SUPPORTED): MPS on a MIG device
// runs without it.
func (l library) SetComputeMode(uuid string, m gpu.ComputeMode) error {
	d, err := l.device(uuid)
	if err != nil {
		return err
	}
	if ret := d.SetComputeMode(nvml.ComputeMode(m)); ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: set compute mode %s: %w", uuid, m, ret)
	}
	return nil
}

// SetTimeSlice sets the GPU's time-slice level of the compute policy: 0
// default, 1 short, 2 medium, 3 long.
func (b *Backend) SetTimeSlice(uuid string, level int) error {
	if err := b.policy.setTimeSlice(uuid, level); err != nil {
		return fmt.Errorf("GPU %s: set time slice %d: %w", uuid, level, err)
	}
	return nil
}

// MPSDaemon is how to run the MPS control daemon of the device with the
// given UUID (GPU-… or MIG-…), in the foreground.
func (b *Backend) MPSDaemon(deviceUUID string) gpu.DaemonCommand {
	return b.policy.mpsDaemon(deviceUUID)
}

// IMEXCtl is how to run nvidia-imex-ctl, which asks the node's IMEX
// daemon whether it is ready: the driver root's on real GPUs, the
// stand-in's on fake ones.
func (b *Backend) IMEXCtl() gpu.ToolCommand {
	return b.policy.imexCtl()
}
