package gpu

// Edits is what a container receives for a device: environment variables,
// device nodes and mounts. The NVML backend decides what they point at (real
// device nodes and driver files on a GPU node, harmless stand-ins under the
// fake backend); the node state turns them into CDI specs.
type Edits struct {
	Env         []string // "KEY=value"
	DeviceNodes []DeviceNode
	Mounts      []Mount
}

// DeviceNode is a device node to create in the container.
type DeviceNode struct {
	// Path inside the container, e.g. "/dev/nvidia0".
	Path string
	// HostPath on the node; empty means the same as Path.
	HostPath string
}

// Mount is a bind mount into the container.
type Mount struct {
	HostPath      string
	ContainerPath string
	Options       []string
}

// Append returns e with other's edits appended.
func (e Edits) Append(other Edits) Edits {
	return Edits{
		Env:         append(append([]string(nil), e.Env...), other.Env...),
		DeviceNodes: append(append([]DeviceNode(nil), e.DeviceNodes...), other.DeviceNodes...),
		Mounts:      append(append([]Mount(nil), e.Mounts...), other.Mounts...),
	}
}
