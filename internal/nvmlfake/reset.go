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
	"errors"
	"fmt"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// ResetGPU does to the GPU with the given UUID in stateDir what
// `nvidia-smi --gpu-reset` does: a pending MIG mode takes effect and the
// GPU's MIG instances are gone, and the recovery action an XID left goes
// back to NONE. Running Servers see the change at their next call. A
// reset that clears an action is the driver's all-clear: it is logged as
// a recovery-action event after the state change, which event sets
// deliver to GPUs registered for nvml.EventTypeGpuRecoveryAction
// (drivers from R565 on; eventset.go).
func ResetGPU(stateDir, uuid string) error {
	cleared := false
	err := mutateStateDir(stateDir, func(st *state) error {
		gs, ok := st.GPUs[uuid]
		if !ok {
			return fmt.Errorf("no GPU %s in %s", uuid, stateDir)
		}
		if gs.Lost {
			return fmt.Errorf("GPU %s has fallen off the bus: a GPU reset cannot reach it; reboot the node", uuid)
		}
		cleared = gs.RecoveryAction != int(nvml.GPU_RECOVERY_ACTION_NONE)
		gs.resetGPU()
		return nil
	})
	if err != nil || !cleared {
		return err
	}
	if err := appendRecord(filepath.Join(stateDir, eventsFileName), xidRecord{UUID: uuid, Event: recoveryActionEvent}); err != nil {
		return fmt.Errorf("nvmlfake: GPU %s reset, but its recovery-action event was not logged: %w", uuid, err)
	}
	return nil
}

// Reboot does to every GPU in stateDir what a node reboot does: pending
// MIG modes take effect, all MIG instances are gone, and a GPU that had
// fallen off the bus is back (a GPU that is really dead is a GPU removed:
// a profile without it). A Server also
// notices a real reboot by itself, through the kernel's boot ID.
func Reboot(stateDir string) error {
	return mutateStateDir(stateDir, func(st *state) error {
		for _, gs := range st.GPUs {
			gs.reboot()
		}
		return nil
	})
}

func mutateStateDir(stateDir string, fn func(*state) error) error {
	if stateDir == "" {
		return errors.New("nvmlfake: no state directory")
	}
	st, err := newStore(stateDir, klog.Logger{}) // mutate returns its errors
	if err != nil {
		return fmt.Errorf("nvmlfake: %w", err)
	}
	if err := st.mutate(fn); err != nil {
		return fmt.Errorf("nvmlfake: %w", err)
	}
	return nil
}
