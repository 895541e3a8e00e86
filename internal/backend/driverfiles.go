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
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"k8s.io/klog/v2"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpudra/gpudra/internal/gpu"
)

// DefaultCDIHookPath is where the chart puts NVIDIA's nvidia-cdi-hook on
// the host.
const DefaultCDIHookPath = "/var/lib/gpudra/bin/nvidia-cdi-hook"

// driverRoot is an NVIDIA driver installation as the plugin sees it and as
// the host (whose container runtime reads the CDI specs) sees it.
type driverRoot struct {
	// path is where the plugin reads the installation ("/" or the mount of
	// the host's driver root, e.g. /driver-root).
	path string
	// hostPath is the same directory on the host ("/",
	// "/run/nvidia/driver"); empty means the same as path.
	hostPath string
}

// driverEdits are what every container needs of the NVIDIA driver's user
// space: its libraries, binaries, firmware and IPC sockets as bind mounts,
// and the hooks (nvidia-cdi-hook) that create the libraries' symlinks and
// update the container's ld cache. NVIDIA's container toolkit finds them
// (nvcdi, the library behind nvidia-ctk cdi generate), from the driver
// version NVML reports, so no NVIDIA container runtime is needed.
//
// Device nodes are left out: the backends give those per device (and the
// control nodes, which appear lazily, on each call).
func driverEdits(ctx context.Context, lib nvml.Interface, root driverRoot, hookPath string) (gpu.Edits, error) {
	if hookPath == "" {
		hookPath = DefaultCDIHookPath
	}
	cdilib, err := nvcdi.New(
		nvcdi.WithNvmlLib(lib),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithDriverRoot(root.path),
		nvcdi.WithNVIDIACDIHookPath(hookPath),
		nvcdi.WithLogger(toolkitLogger{klog.FromContext(ctx).WithName("nvcdi")}),
		// nvsandboxutils is a library of the driver's that gpudra does
		// not load (it would be dlopened from the plugin's image).
		nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
	)
	if err != nil {
		return gpu.Edits{}, fmt.Errorf("NVIDIA container toolkit (driver root %s): %w", root.path, err)
	}
	edits, err := cdilib.GetCommonEdits()
	if err != nil {
		return gpu.Edits{}, fmt.Errorf("find the driver's files below %s: %w", root.path, err)
	}
	return fromToolkit(edits.ContainerEdits, root), nil
}

// fromToolkit converts the toolkit's edits, with host paths below the
// driver root as the plugin sees it moved to where the host has it.
func fromToolkit(e *cdispecs.ContainerEdits, root driverRoot) gpu.Edits {
	var out gpu.Edits
	if e == nil {
		return out
	}
	out.Env = append(out.Env, e.Env...)
	for _, m := range e.Mounts {
		out.Mounts = append(out.Mounts, gpu.Mount{
			HostPath:      root.onHost(m.HostPath),
			ContainerPath: m.ContainerPath,
			Options:       append([]string(nil), m.Options...),
		})
	}
	for _, h := range e.Hooks {
		out.Hooks = append(out.Hooks, gpu.Hook{Name: h.HookName, Path: h.Path, Args: append([]string(nil), h.Args...), Env: append([]string(nil), h.Env...)})
	}
	return out
}

// onHost maps a path below the driver root as the plugin sees it to the
// host's path.
func (r driverRoot) onHost(path string) string {
	if r.hostPath == "" || r.hostPath == r.path {
		return path
	}
	rel, err := filepath.Rel(r.path, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path // not below the driver root: a host path already
	}
	return filepath.Join(r.hostPath, rel)
}

// toolkitLogger hands the toolkit's log lines to klog, all verbose: its
// warnings are mostly about optional files a driver installation lacks
// (graphics libraries on a compute node).
type toolkitLogger struct{ logger klog.Logger }

func (l toolkitLogger) Debugf(f string, args ...any) { l.logger.V(5).Info(fmt.Sprintf(f, args...)) }
func (l toolkitLogger) Tracef(f string, args ...any) { l.logger.V(6).Info(fmt.Sprintf(f, args...)) }
func (l toolkitLogger) Infof(f string, args ...any)  { l.logger.V(4).Info(fmt.Sprintf(f, args...)) }
func (l toolkitLogger) Warningf(f string, args ...any) {
	l.logger.V(2).Info("Warning: " + fmt.Sprintf(f, args...))
}
func (l toolkitLogger) Errorf(f string, args ...any) {
	l.logger.Error(nil, fmt.Sprintf(f, args...))
}
