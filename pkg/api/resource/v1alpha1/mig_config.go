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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MigConfig configures the MIG partitions allocated to the requests it
// applies to.
//
// It is a kind of its own, rather than a flag on GpuConfig, because MIG
// partitions take settings that make no sense for a whole GPU (and refuse
// some that do, such as a time-slice interval).
//
// Example, MPS on a MIG partition:
//
//	apiVersion: resource.gpudra.io/v1alpha1
//	kind: MigConfig
//	driverCapabilities: ["compute", "utility"]
//	sharing:
//	  strategy: MPS
//	  mps:
//	    defaultActiveThreadPercentage: 50
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type MigConfig struct {
	metav1.TypeMeta `json:",inline"`

	// DriverCapabilities selects which parts of the NVIDIA driver (libraries
	// and binaries) are made available in the container; it becomes the
	// container's NVIDIA_DRIVER_CAPABILITIES.
	//
	// Supported values: compute (CUDA and OpenCL), compat32 (32-bit
	// applications), graphics (OpenGL and Vulkan), utility (nvidia-smi and
	// NVML), video (Video Codec SDK), display (X11 display) and all.
	// Values are case-sensitive and may be listed only once.
	//
	// Default when unset or empty: ["compute", "utility"].
	//
	// +optional
	DriverCapabilities []string `json:"driverCapabilities,omitempty"`

	// Sharing says how the containers of this claim, and of other claims
	// allocated the same MIG partition (consumable capacity), share it:
	// TimeSlicing or MPS. See Sharing.
	//
	// +optional
	Sharing *Sharing `json:"sharing,omitempty"`
}

// NewMigConfig returns the configuration a device gets when its claim has
// none: defaulted, with apiVersion and kind set.
func NewMigConfig() *MigConfig {
	c := &MigConfig{TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: MigConfigKind}}
	c.Default()
	return c
}

// Default sets DriverCapabilities to DefaultDriverCapabilities when unset,
// and the settings of the chosen sharing strategy.
func (c *MigConfig) Default() {
	c.DriverCapabilities = defaultDriverCapabilities(c.DriverCapabilities)
	c.Sharing.Default()
}

// Validate reports every invalid field, with paths relative to the
// parameters (the first errorlist.Max of them, and how many there are).
func (c *MigConfig) Validate() error {
	errs := validateDriverCapabilities(c.DriverCapabilities, parametersPath.Child("driverCapabilities"))
	errs = append(errs, c.Sharing.validate(parametersPath.Child("sharing"), true)...)
	return summarize(errs)
}

// DriverCapabilitiesEnv is the "NVIDIA_DRIVER_CAPABILITIES=..." entry for
// the container's environment.
func (c *MigConfig) DriverCapabilitiesEnv() string {
	return driverCapabilitiesEnv(c.DriverCapabilities)
}
