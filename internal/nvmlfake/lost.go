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
	"reflect"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A GPU can fall off the bus (XID 79: a PCIe link failure, a power or
// thermal fault): the kernel driver reports the XID, and from then on every
// NVML call that touches the GPU fails with NVML_ERROR_GPU_IS_LOST
// (nvml.h: "the target GPU has fallen off the bus or is otherwise
// inaccessible"; nvidia-smi prints "GPU is lost. Reboot the system to
// recover this GPU"). nvmlDeviceGetCount still counts it. Its MIG
// instances do not survive: the reset or reboot that recovers the GPU
// destroys them.
//
// The fake keeps "lost" in the state file, so every process over the state
// directory sees it and a restarted plugin finds the GPU still lost, until
// Reboot. Lookups by index, UUID and PCI bus ID of the lost GPU answer
// ERROR_GPU_IS_LOST, and so does every method of every handle that
// belongs to it (the GPU, its GPU and compute instances, its MIG
// devices). nvml.h documents the lookups by UUID and PCI bus ID as failing
// "if any GPU has fallen off the bus"; the fake fails only the lost GPU's
// own lookups, and internal/backend copes with either reading.

// xidFallenOffTheBus is the XID the driver reports for a lost GPU.
const xidFallenOffTheBus = 79

// LoseGPU makes the GPU with the given UUID in stateDir fall off the bus:
// ERROR_GPU_IS_LOST from every call on it, for every Server over stateDir,
// until Reboot, and then the XID 79 event that reports it. The loss comes
// first, as on real hardware (see InjectXID).
func LoseGPU(stateDir, uuid string) error {
	if err := mutateStateDir(stateDir, func(st *state) error { return loseGPU(st, uuid) }); err != nil {
		return err
	}
	return InjectXID(stateDir, uuid, xidFallenOffTheBus)
}

// LoseGPU does what the package-level LoseGPU does, for this Server's
// state (in memory or in its state directory).
func (s *Server) LoseGPU(uuid string) error {
	if err := s.store.mutate(func(st *state) error { return loseGPU(st, uuid) }); err != nil {
		return fmt.Errorf("nvmlfake: %w", err)
	}
	return s.InjectXID(uuid, xidFallenOffTheBus)
}

func loseGPU(st *state, uuid string) error {
	gs, ok := st.GPUs[uuid]
	if !ok {
		return errors.New("no GPU " + uuid)
	}
	gs.Lost = true
	return nil
}

// lost reports whether the GPU has fallen off the bus.
func (g *fakeGPU) lost() bool {
	lost := false
	g.view(func(gs *gpuState) { lost = gs.Lost })
	return lost
}

// complete finishes a mock object that belongs to this GPU: as
// Server.complete does, and every method that reports an nvml.Return
// answers ERROR_GPU_IS_LOST while the GPU is lost.
func (g *fakeGPU) complete(mockPtr any) {
	fillNotSupported(mockPtr)
	funcFields(mockPtr, func(_ string, f reflect.Value) {
		if !returnsStatus(f.Type()) {
			return
		}
		inner, t := reflect.ValueOf(f.Interface()), f.Type()
		f.Set(reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
			if g.lost() {
				return results(t, nvml.ERROR_GPU_IS_LOST)
			}
			return inner.Call(args)
		}))
	})
	guardInit(mockPtr, g.s.life.ready)
}
