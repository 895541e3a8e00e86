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
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
)

// nvmlFiles are what a container receives for the real libnvidia-ml's
// GPUs: the driver's device nodes.
type nvmlFiles struct {
	// devRoot is where the driver's device nodes are: the driver root
	// when the driver container created them there, "/" otherwise.
	devRoot string
	// hostDevRoot is devRoot on the host, which the CDI specs name.
	hostDevRoot string
	// procRoot is the proc file system ("/proc"), where the driver lists
	// MIG capabilities.
	procRoot string
}

// libDirs are where distributions and the driver container install
// libnvidia-ml, relative to the driver root.
var libDirs = []string{
	"usr/lib64",
	"usr/lib/x86_64-linux-gnu",
	"usr/lib/aarch64-linux-gnu",
	"lib64",
	"lib/x86_64-linux-gnu",
	"lib/aarch64-linux-gnu",
	"usr/lib",
}

const nvmlLibrary = "libnvidia-ml.so.1"

var _ deviceFiles = nvmlFiles{}

func openNVML(ctx context.Context, opts Options) (*Backend, error) {
	root := opts.DriverRoot
	if root == "" {
		root = "/"
	}
	lib := nvml.New()
	libPath := ""
	if root != "/" {
		path, err := findLibrary(root)
		if err != nil {
			return nil, err
		}
		lib, libPath = nvml.New(nvml.WithLibraryPath(path)), path
	}
	var refused *refusals
	if opts.ReadOnly {
		lib, refused = readOnly(lib)
	}
	l, err := initLibrary(lib, opts.NodeName, "driver root "+root)
	if err != nil {
		return nil, err
	}
	dr := driverRoot{path: root, hostPath: opts.HostDriverRoot}
	var driver gpu.Edits
	if !opts.InventoryOnly {
		if driver, err = driverEdits(ctx, lib, dr, opts.CDIHookPath); err != nil {
			_ = l.Close()
			return nil, err
		}
	}
	devRoot := devRootOf(root)
	files := nvmlFiles{devRoot: devRoot, hostDevRoot: dr.onHost(devRoot), procRoot: "/proc"}
	return &Backend{library: l, files: files, driver: driver, policy: newNVMLPolicy(root, libPath), refused: refused}, nil
}

// findLibrary finds libnvidia-ml below a driver root such as the GPU
// Operator's /run/nvidia/driver.
func findLibrary(root string) (string, error) {
	for _, dir := range libDirs {
		path := filepath.Join(root, dir, nvmlLibrary)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("driver root %s: %s is in none of %v below it", root, nvmlLibrary, libDirs)
}

// devRootOf returns the driver root if the driver's control device is
// below it, "/" otherwise.
func devRootOf(driverRoot string) string {
	if driverRoot != "/" && exists(filepath.Join(driverRoot, "dev", "nvidiactl")) {
		return driverRoot
	}
	return "/"
}

// commonDeviceNodes are the driver's control devices every CUDA process
// opens; the UVM ones appear once nvidia-uvm is loaded.
var commonDeviceNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

func (b nvmlFiles) commonEdits() gpu.Edits {
	var e gpu.Edits
	// Looked up on every call: nvidia-uvm nodes are created lazily, after
	// the plugin may have started.
	for _, path := range commonDeviceNodes {
		if exists(filepath.Join(b.devRoot, path)) {
			e.DeviceNodes = append(e.DeviceNodes, b.deviceNode(path))
		}
	}
	return e
}

func (b nvmlFiles) deviceEdits(g gpu.GPU) gpu.Edits {
	return gpu.Edits{DeviceNodes: []gpu.DeviceNode{b.deviceNode(fmt.Sprintf("/dev/nvidia%d", g.Minor))}}
}

// deviceNode is a device node at path in the container, taken from the
// dev root on the host.
func (b nvmlFiles) deviceNode(path string) gpu.DeviceNode {
	n := gpu.DeviceNode{Path: path}
	if b.hostDevRoot != "/" && b.hostDevRoot != "" {
		n.HostPath = filepath.Join(b.hostDevRoot, path)
	}
	return n
}

func (nvmlFiles) sysfsRoot() string { return "/" }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
