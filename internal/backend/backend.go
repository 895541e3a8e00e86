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

// Package backend is the NVML layer's face to the rest of gpudra: it opens
// either the real NVML library or the fake GPUs behind the same
// nvml.Interface, discovers the node's GPUs with one code path, and says what
// a container needs to use a device.
package backend

import (
	"errors"
	"sync/atomic"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Backend is one node's GPUs, reached through nvml.Interface. It opens
// either the real library ("nvml") or go-nvml's mock servers raised to
// hardware fidelity ("fake"); discovery, health and MIG operations are one
// code path over either, and the only thing that differs is what a
// container is given for a device (its deviceFiles). Everything above this
// package uses its methods and never asks which library it has.
//
// The node state declares what it needs of a Backend (nodestate.Hardware);
// internal/plugin makes the compiler check that a *Backend provides it.
type Backend struct {
	library
	files deviceFiles
	// driver is what every container needs of the driver's user space
	// (libraries, binaries, firmware, hooks), found once at Open.
	driver gpu.Edits
	// policy sets what NVML cannot: the time slice, and how to run an
	// MPS control daemon.
	policy policyTools
	// refused records the calls a read-only backend refused.
	refused *refusals
	// closed is set by the first Close.
	closed atomic.Bool
}

// Refused lists the NVML calls that would have changed a GPU and that a
// backend opened with Options.ReadOnly refused (nil otherwise).
func (b *Backend) Refused() []string {
	if b.refused == nil {
		return nil
	}
	return b.refused.list()
}

// ErrClosed is what Close returns for a backend closed already.
var ErrClosed = errors.New("NVML backend closed already")

// Close releases NVML. A backend has one owner, which closes it once (the
// kubelet plugin hands it to plugin.Start, which closes it on a failed
// start or on Stop); a second Close is the owner's bug: it returns
// ErrClosed instead of shutting NVML down again, which would take away
// another user's reference to the library (NVML counts them per
// process).
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return b.library.Close()
}

// deviceFiles is what the two backends give a container for a device:
// real device nodes (and, on a real node, driver files), or harmless
// stand-ins that name the device under the fake.
type deviceFiles interface {
	// commonEdits is what every container with at least one of this
	// driver's devices needs (control device nodes, driver files).
	commonEdits() gpu.Edits
	// deviceEdits is what a container needs to use one whole GPU.
	deviceEdits(g gpu.GPU) gpu.Edits
	// migDeviceEdits is what a container needs to use one MIG device of
	// the parent GPU.
	migDeviceEdits(parent gpu.GPU, giID, ciID int, migUUID string) (gpu.Edits, error)
	// imexChannelEdits is what a container needs to use an IMEX channel
	// (imex.go).
	imexChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error)
	// sysfsRoot is the root under which /sys/bus/pci/devices/<busID>
	// resolves.
	sysfsRoot() string
}

// CommonEdits is what every container with at least one of this driver's
// devices needs: the control device nodes, and the driver's libraries,
// binaries, firmware and IPC sockets for the driver capabilities (none
// means compute and utility), with the hooks that make them usable (found
// with NVIDIA's container toolkit, see driverEdits).
func (b *Backend) CommonEdits(driverCapabilities []string) gpu.Edits {
	return b.files.commonEdits().Append(forCapabilities(b.driver, driverCapabilities))
}

// DeviceEdits is what a container needs to use one whole GPU.
func (b *Backend) DeviceEdits(g gpu.GPU) gpu.Edits { return b.files.deviceEdits(g) }

// MigDeviceEdits is what a container needs to use one MIG device of the
// parent GPU.
func (b *Backend) MigDeviceEdits(parent gpu.GPU, giID, ciID int, migUUID string) (gpu.Edits, error) {
	return b.files.migDeviceEdits(parent, giID, ciID, migUUID)
}

// SysfsRoot is the root under which /sys/bus/pci/devices/<busID> can be
// resolved for the standard PCIe-root and NUMA attributes: "/" on a real
// node, a directory the fake populates under the fake backend.
func (b *Backend) SysfsRoot() string { return b.files.sysfsRoot() }

// Options select and configure a backend.
type Options struct {
	// Kind is "nvml" or "fake".
	Kind string
	// NodeName seeds the fake's UUIDs and PCI bus IDs.
	NodeName string
	// FakeProfile is a built-in profile name (nvmlfake.Profiles) or the
	// path of a profile file.
	FakeProfile string
	// FakeStateDir holds the fake GPUs' persistent state (MIG instances,
	// health), so that a restarted plugin sees what the previous one did.
	FakeStateDir string
	// DriverRoot is where the plugin finds the NVIDIA driver installation:
	// "/" normally, or where the host's driver root is mounted into the
	// plugin's container (the chart mounts it at /driver-root).
	DriverRoot string
	// HostDriverRoot is the same directory on the host ("/",
	// "/run/nvidia/driver" with the GPU Operator), which the CDI specs'
	// mounts name; empty means DriverRoot.
	HostDriverRoot string
	// CDIHookPath is where NVIDIA's nvidia-cdi-hook is on the host (the
	// container runtime runs it); empty means DefaultCDIHookPath.
	CDIHookPath string
	// InventoryOnly opens the backend to discover the GPUs and nothing
	// else (gpudra inventory, gpudra check's fake nodes): the driver files
	// for containers are not looked for, and CommonEdits has none.
	InventoryOnly bool
	// FakeIMEXMajor is the major the fake backend gives the IMEX
	// channels' character device (0: DefaultFakeIMEXMajor), as the real
	// driver's /proc/devices would.
	FakeIMEXMajor int
	// ReadOnly opens NVML so that no call can change a GPU (gpudra
	// inventory, gpudra gpu-check): every mutating call is refused with
	// ERROR_NO_PERMISSION and listed in Refused. Such a backend cannot
	// prepare MIG partitions or sharing.
	ReadOnly bool
}
