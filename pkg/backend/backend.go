// Package backend is the NVML layer's face to the rest of gpudra: it opens
// either the real NVML library or the fake GPUs behind the same
// nvml.Interface, discovers the node's GPUs with one code path, and says what
// a container needs to use a device.
package backend

import (
	"context"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// Backend is one node's GPUs, reached through nvml.Interface. There are two
// implementations, "nvml" (the real library) and "fake" (go-nvml's mock
// servers raised to hardware fidelity); everything above this package uses
// only this interface and never asks which one it has.
type Backend interface {
	// Discover enumerates the node's GPUs. It is cheap enough to call on
	// every resync; results are in index order.
	Discover(ctx context.Context) (gpu.Node, error)

	// CommonEdits is what every container with at least one of this
	// driver's devices needs (control device nodes, driver files).
	CommonEdits() gpu.Edits

	// DeviceEdits is what a container needs to use one whole GPU.
	DeviceEdits(g gpu.GPU) gpu.Edits

	// SysfsRoot is the root under which /sys/bus/pci/devices/<busID> can be
	// resolved for the standard PCIe-root and NUMA attributes: "/" on a real
	// node, a directory the fake populates under the fake backend.
	SysfsRoot() string

	// WatchHealth sends a HealthEvent each time a GPU's health changes
	// (XID errors, a GPU lost, recovery) until ctx is done. It returns
	// nil when ctx is cancelled.
	WatchHealth(ctx context.Context, events chan<- gpu.HealthEvent) error

	// Close releases NVML.
	Close() error
	// MIG creates and destroys MIG partitions.
	MIG
}

// Options select and configure a backend.
type Options struct {
	// Kind is "nvml" or "fake".
	Kind string
	// NodeName seeds the fake's UUIDs and PCI bus IDs.
	NodeName string
	// FakeProfile is a built-in profile name (dgx-a100, dgx-h100, dgx-h200,
	// dgx-b200, mixed) or the path of a profile file.
	FakeProfile string
	// FakeStateDir holds the fake GPUs' persistent state (MIG instances,
	// health), so that a restarted plugin sees what the previous one did.
	FakeStateDir string
	// DriverRoot is where the NVIDIA driver is installed on the host
	// ("/" normally, "/run/nvidia/driver" with the GPU Operator).
	DriverRoot string
}
