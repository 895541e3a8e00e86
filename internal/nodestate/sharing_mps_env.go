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

package nodestate

import (
	"fmt"
	"strconv"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// Where a claim's MPS clients find their control daemon, inside the
// container: the MPS defaults, so that tools that ignore the environment
// find it too.
const (
	mpsPipeDirInContainer = "/tmp/nvidia-mps"
	mpsLogDirInContainer  = "/var/log/nvidia-mps"
	mpsShmInContainer     = "/dev/shm"
)

// Environment variables of an MPS client.
const (
	envMPSPipeDir      = "CUDA_MPS_PIPE_DIRECTORY"
	envMPSLogDir       = "CUDA_MPS_LOG_DIRECTORY"
	envMPSThreads      = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	envMPSPinnedMemory = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
)

// clientEnv is what an MPS client needs in its environment: where the
// daemon's pipes are, and its limits.
func (mpsStrategy) clientEnv(sh *checkpoint.DeviceSharing) []string {
	env := []string{envMPSPipeDir + "=" + mpsPipeDirInContainer, envMPSLogDir + "=" + mpsLogDirInContainer}
	if sh.ActiveThreadPercentage > 0 {
		env = append(env, envMPSThreads+"="+strconv.Itoa(sh.ActiveThreadPercentage))
	}
	if sh.PinnedMemoryMiB > 0 {
		env = append(env, fmt.Sprintf("%s=0=%dM", envMPSPinnedMemory, sh.PinnedMemoryMiB))
	}
	return env
}

// containerEdits are the mounts an MPS client needs: the daemon's pipe
// directory (read-write: clients create their own pipes there), its log
// directory (read-only), and its /dev/shm, through which MPS passes memory
// between the server and its clients.
func (m mpsStrategy) containerEdits(s *State, d checkpoint.Device) (gpu.Edits, error) {
	dm, err := m.daemonFor(s, d.Sharing.MPSDaemon, "")
	if err != nil {
		return gpu.Edits{}, err
	}
	rw := []string{"rw", "nosuid", "nodev", "bind"}
	return gpu.Edits{Mounts: []gpu.Mount{
		{HostPath: dm.PipeDir(), ContainerPath: mpsPipeDirInContainer, Options: rw},
		{HostPath: dm.LogDir(), ContainerPath: mpsLogDirInContainer, Options: []string{"ro", "nosuid", "nodev", "bind"}},
		{HostPath: dm.ShmDir(), ContainerPath: mpsShmInContainer, Options: rw},
	}}, nil
}
