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
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/imexstandin"
	"github.com/gpudra/gpudra/internal/mpsstandin"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// fakePolicy keeps the time slice in the fake GPUs' state and runs the MPS
// stand-in, a real process that behaves like nvidia-cuda-mps-control to
// the plugin (pipe directory, control socket), for the MPS daemon.
type fakePolicy struct {
	srv *nvmlfake.Server
	// self is the executable that carries the stand-in (the plugin's own
	// binary, or a test binary that dispatches to it).
	self string
}

var _ policyTools = fakePolicy{}

func newFakePolicy(srv *nvmlfake.Server) fakePolicy {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return fakePolicy{srv: srv, self: self}
}

func (f fakePolicy) setTimeSlice(uuid string, level int) error {
	if ret := f.srv.SetTimeSlice(uuid, level); ret != nvml.SUCCESS {
		return ret
	}
	return nil
}

func (f fakePolicy) mpsDaemon(deviceUUID string) gpu.DaemonCommand {
	return gpu.DaemonCommand{
		Args:    []string{f.self, mpsstandin.Subcommand},
		Env:     []string{"CUDA_VISIBLE_DEVICES=" + deviceUUID},
		Control: []string{f.self, mpsstandin.ControlSubcommand},
	}
}

// imexCtl is the stand-in's nvidia-imex-ctl, in the plugin's own binary
// (imexstandin dispatches on its first argument).
func (f fakePolicy) imexCtl() gpu.ToolCommand {
	return gpu.ToolCommand{Args: []string{f.self, imexstandin.CtlSubcommand}}
}

// TimeSlice reads a fake GPU's time-slice level: for tests, which check
// what a claim did to the "hardware".
func TimeSlice(b *Backend, uuid string) (int, error) {
	f, ok := b.policy.(fakePolicy)
	if !ok {
		return 0, fmt.Errorf("the time slice can be read back only from fake GPUs")
	}
	level, ret := f.srv.TimeSlice(uuid)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return level, nil
}
