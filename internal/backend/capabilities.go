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
	"path"
	"slices"
	"strings"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Driver capabilities as NVIDIA_DRIVER_CAPABILITIES spells them (the
// config API validates what users write; a test checks both agree).
const (
	capCompute  = "compute"
	capCompat32 = "compat32"
	capGraphics = "graphics"
	capUtility  = "utility"
	capVideo    = "video"
	capDisplay  = "display"
	capAll      = "all"
)

// defaultCapabilities are the NVIDIA container toolkit's default.
var defaultCapabilities = []string{capCompute, capUtility}

// NVIDIA's container toolkit, generating CDI specs, mounts every file of
// the driver whatever NVIDIA_DRIVER_CAPABILITIES says (only its legacy
// runtime hook honours the variable). gpudra mounts what the capabilities
// of a claim's configs (GpuConfig/MigConfig driverCapabilities) ask for,
// as the NVIDIA container runtime always has: the file lists below are
// those of libnvidia-container (its per-capability library and binary
// lists). A file of no known capability (firmware, IPC sockets, a library
// newer than this list) is always mounted: a missing file breaks a
// workload, an extra one does not.

// capabilityOfLibrary is a driver library's capability, by its name
// without ".so.<version>".
var capabilityOfLibrary = map[string]string{
	// utility
	"libnvidia-ml": capUtility, "libnvidia-cfg": capUtility,
	"libnvidia-nscq": capUtility,
	// compute
	"libcuda": capCompute, "libcudadebugger": capCompute,
	"libnvidia-opencl": capCompute, "libnvidia-gpucomp": capCompute,
	"libnvidia-ptxjitcompiler": capCompute, "libnvidia-fatbinaryloader": capCompute,
	"libnvidia-allocator": capCompute, "libnvidia-compiler": capCompute,
	"libnvidia-pkcs11": capCompute, "libnvidia-pkcs11-openssl3": capCompute,
	"libnvidia-nvvm": capCompute, "libnvidia-nvvm70": capCompute,
	// video
	"libvdpau_nvidia": capVideo, "libnvidia-encode": capVideo,
	"libnvidia-opticalflow": capVideo, "libnvcuvid": capVideo,
	// graphics
	"libnvidia-eglcore": capGraphics, "libnvidia-glcore": capGraphics,
	"libnvidia-tls": capGraphics, "libnvidia-glsi": capGraphics,
	"libnvidia-fbc": capGraphics, "libnvidia-ifr": capGraphics,
	"libnvidia-rtcore": capGraphics, "libnvoptix": capGraphics,
	"libGLX_nvidia": capGraphics, "libEGL_nvidia": capGraphics,
	"libGLESv2_nvidia": capGraphics, "libGLESv1_CM_nvidia": capGraphics,
	"libnvidia-glvkspirv": capGraphics, "libnvidia-cbl": capGraphics,
	"libnvidia-egl-gbm": capGraphics, "libnvidia-egl-wayland": capGraphics,
	"libnvidia-vulkan-producer": capGraphics, "nvidia-drm_gbm": capGraphics,
	// display (the X server's)
	"nvidia_drv": capDisplay, "libglxserver_nvidia": capDisplay,
}

// capabilityOfBinary is a driver binary's capability.
var capabilityOfBinary = map[string]string{
	"nvidia-smi": capUtility, "nvidia-debugdump": capUtility,
	"nvidia-persistenced":     capUtility,
	"nvidia-cuda-mps-control": capCompute, "nvidia-cuda-mps-server": capCompute,
}

// thirtyTwoBitDirs hold the 32-bit libraries, which compat32 adds.
var thirtyTwoBitDirs = []string{"/i386-linux-gnu/", "/lib32/", "/usr/lib/i386/"}

// capabilityOf is the capability a driver file in the container belongs
// to, or "" for one that every container gets.
func capabilityOf(containerPath string) string {
	for _, dir := range thirtyTwoBitDirs {
		if strings.Contains(containerPath, dir) {
			return capCompat32
		}
	}
	base := path.Base(containerPath)
	if c, ok := capabilityOfBinary[base]; ok && strings.Contains(containerPath, "/bin/") {
		return c
	}
	if strings.HasSuffix(base, ".json") && (strings.Contains(containerPath, "/glvnd/") || strings.Contains(containerPath, "/vulkan/") ||
		strings.Contains(containerPath, "/egl/")) {
		return capGraphics
	}
	if name, _, ok := strings.Cut(base, ".so"); ok {
		return capabilityOfLibrary[name]
	}
	return ""
}

// forCapabilities keeps the mounts of the driver files the capabilities
// ask for ("all": every one; none: the default, compute and utility), and
// every mount of no known capability.
func forCapabilities(e gpu.Edits, caps []string) gpu.Edits {
	if len(caps) == 0 {
		caps = defaultCapabilities
	}
	if slices.Contains(caps, capAll) {
		return e
	}
	out := e
	out.Mounts = nil
	for _, m := range e.Mounts {
		if c := capabilityOf(m.ContainerPath); c == "" || slices.Contains(caps, c) {
			out.Mounts = append(out.Mounts, m)
		}
	}
	return out
}
