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

package gpu

import "fmt"

// ComputeMode is a GPU's compute mode, numbered as NVML numbers it
// (nvmlComputeMode_t): which processes may create a context on it.
type ComputeMode int

const (
	// ComputeModeDefault lets any number of processes create contexts.
	ComputeModeDefault ComputeMode = 0
	// ComputeModeExclusiveThread is deprecated; listed so that a GPU an
	// admin left in it reads back as what it is.
	ComputeModeExclusiveThread ComputeMode = 1
	// ComputeModeProhibited lets no process create a context.
	ComputeModeProhibited ComputeMode = 2
	// ComputeModeExclusiveProcess lets one process create contexts: with
	// MPS, the MPS server, through which every client runs.
	ComputeModeExclusiveProcess ComputeMode = 3
)

func (m ComputeMode) String() string {
	switch m {
	case ComputeModeDefault:
		return "Default"
	case ComputeModeExclusiveThread:
		return "ExclusiveThread"
	case ComputeModeProhibited:
		return "Prohibited"
	case ComputeModeExclusiveProcess:
		return "ExclusiveProcess"
	}
	return fmt.Sprintf("ComputeMode(%d)", int(m))
}

// DaemonCommand is how to run a device's MPS control daemon in the
// foreground: the real nvidia-cuda-mps-control from the driver, or the
// fake backend's stand-in. The backend decides; the launcher (a process
// on the node, or a pod) only runs it.
type DaemonCommand struct {
	// Args[0] is the executable, as the plugin's container sees it; a
	// daemon pod mounts the same paths.
	Args []string
	// Env is the daemon's environment, on top of the pipe and log
	// directories the node state adds.
	Env []string
	// Control is the MPS control client, run by the plugin in its own
	// container with the daemon's environment: it reads control commands
	// on stdin, sends them to the daemon of the pipe directory in its
	// environment and prints the replies (nvidia-cuda-mps-control without
	// -f, or the stand-in's client). The plugin asks the daemon whether it
	// is alive through it.
	Control []string
	// HostAccess says that the daemon needs the host's GPU device nodes
	// and process IDs (the real nvidia-cuda-mps-control: it opens the
	// GPU and tracks its clients' processes); a daemon pod then runs
	// privileged, in the host's PID namespace. The fake's stand-in needs
	// neither.
	HostAccess bool
}

// ToolCommand is how to run one of the driver's command-line tools in the
// plugin's container: Args[0] is the executable (arguments follow the
// caller's), Env its environment (nil: the plugin's own).
type ToolCommand struct {
	Args []string
	Env  []string
}
