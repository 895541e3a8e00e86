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

package v1alpha1

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// Driver capabilities, as the NVIDIA Container Toolkit names them in
// NVIDIA_DRIVER_CAPABILITIES. Each one makes a set of driver libraries and
// binaries available in the container.
const (
	// CapabilityCompute is required for CUDA and OpenCL applications.
	CapabilityCompute = "compute"
	// CapabilityCompat32 is required for running 32-bit applications.
	CapabilityCompat32 = "compat32"
	// CapabilityGraphics is required for running OpenGL and Vulkan
	// applications.
	CapabilityGraphics = "graphics"
	// CapabilityUtility is required for using nvidia-smi and NVML.
	CapabilityUtility = "utility"
	// CapabilityVideo is required for using the Video Codec SDK.
	CapabilityVideo = "video"
	// CapabilityDisplay is required for leveraging X11 display.
	CapabilityDisplay = "display"
	// CapabilityAll enables every capability.
	CapabilityAll = "all"
)

// SupportedDriverCapabilities lists every value driverCapabilities accepts,
// in the order error messages show them.
var SupportedDriverCapabilities = []string{
	CapabilityCompute, CapabilityCompat32, CapabilityGraphics, CapabilityUtility,
	CapabilityVideo, CapabilityDisplay, CapabilityAll,
}

// DefaultDriverCapabilities is what a container gets when driverCapabilities
// is unset or empty: the NVIDIA Container Toolkit's own default, so that a
// claim without config behaves as a GPU container always has.
var DefaultDriverCapabilities = []string{CapabilityCompute, CapabilityUtility}

// DriverCapabilitiesEnvVar is the environment variable the capabilities reach
// the container through.
const DriverCapabilitiesEnvVar = "NVIDIA_DRIVER_CAPABILITIES"

// driverCapabilitiesEnv renders capabilities as NVIDIA_DRIVER_CAPABILITIES
// expects them: comma-separated, in the order given.
func driverCapabilitiesEnv(caps []string) string {
	if len(caps) == 0 {
		caps = DefaultDriverCapabilities
	}
	return DriverCapabilitiesEnvVar + "=" + strings.Join(caps, ",")
}

// defaultDriverCapabilities returns caps, or a fresh copy of the default when
// caps is empty (a copy, so that no config shares the package's slice).
func defaultDriverCapabilities(caps []string) []string {
	if len(caps) > 0 {
		return caps
	}
	return append([]string(nil), DefaultDriverCapabilities...)
}

// validateDriverCapabilities reports values the NVIDIA Container Toolkit does
// not know and values listed twice. Values are case-sensitive, as they are in
// the toolkit.
func validateDriverCapabilities(caps []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]bool, len(caps))
	for i, c := range caps {
		switch {
		case !slices.Contains(SupportedDriverCapabilities, c):
			errs = append(errs, field.NotSupported(path.Index(i), errorlist.Value(c), SupportedDriverCapabilities))
		case seen[c]:
			errs = append(errs, field.Duplicate(path.Index(i), errorlist.Value(c)))
		}
		seen[c] = true
	}
	return errs
}
