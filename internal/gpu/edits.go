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

// Edits is what a container receives for a device: environment variables,
// device nodes and mounts. The NVML backend decides what they point at (real
// device nodes and driver files on a GPU node, harmless stand-ins under the
// fake backend); the node state turns them into CDI specs.
type Edits struct {
	Env         []string // "KEY=value"
	DeviceNodes []DeviceNode
	Mounts      []Mount
	// Hooks run on the host when the container is created, e.g. the NVIDIA
	// CDI hook that updates the container's ld cache.
	Hooks []Hook
}

// DeviceNode is a device node to create in the container.
type DeviceNode struct {
	// Path inside the container, e.g. "/dev/nvidia0".
	Path string
	// HostPath on the node; empty means the same as Path.
	HostPath string
	// Type ("c": a character device), Major and Minor, when set, are what
	// the runtime creates the node in the container with, rather than
	// what it finds at HostPath: an IMEX channel's node need not exist on
	// the host (nothing creates channels there), only its device numbers
	// must be right.
	Type         string
	Major, Minor int64
}

// Mount is a bind mount into the container.
type Mount struct {
	HostPath      string
	ContainerPath string
	Options       []string
}

// Hook is an OCI hook: a host program the container runtime runs at one
// point of the container's life.
type Hook struct {
	// Name is the OCI hook point, e.g. "createContainer".
	Name string
	// Path is the program on the host; Args start with its name.
	Path string
	Args []string
	Env  []string
}

// Append returns e with other's edits appended.
func (e Edits) Append(other Edits) Edits {
	return Edits{
		Env:         append(append([]string(nil), e.Env...), other.Env...),
		DeviceNodes: append(append([]DeviceNode(nil), e.DeviceNodes...), other.DeviceNodes...),
		Mounts:      append(append([]Mount(nil), e.Mounts...), other.Mounts...),
		Hooks:       append(append([]Hook(nil), e.Hooks...), other.Hooks...),
	}
}
