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
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeviceStatusKind is the kind of the data gpudra's kubelet plugin writes
// into ResourceClaim status.devices[].data.
const DeviceStatusKind = "DeviceStatus"

// DeviceStatus is what gpudra's kubelet plugin reports about one prepared
// device in its ResourceClaim's status.devices[].data (KEP-4817), so that
// `kubectl describe resourceclaim`, `gpudra status` and monitoring can tell
// which physical GPU or MIG device a claim holds, and how it is shared:
//
//	apiVersion: resource.gpudra.io/v1alpha1
//	kind: DeviceStatus
//	uuid: MIG-5c6f…
//	parentUUID: GPU-1b2c…
//	pciBusID: "0000:1b:00.0"
//	productName: NVIDIA H100 80GB HBM3
//	minor: 0
//	mig: {profile: 1g.10gb, placementStart: 3, placementSize: 1, gpuInstanceID: 9, computeInstanceID: 0}
//	sharing: {strategy: MPS, activeThreadPercentage: 50, pinnedDeviceMemoryLimit: 20Gi}
//	driverCapabilities: [compute, utility]
//
// It is written by the plugin and read by tools; nothing decodes it
// strictly, and new fields are optional.
type DeviceStatus struct {
	metav1.TypeMeta `json:",inline"`
	// UUID is the device's NVML UUID: the GPU's (GPU-…), or for a MIG
	// partition the MIG device's (MIG-…).
	UUID string `json:"uuid"`
	// ParentUUID is a MIG partition's GPU.
	ParentUUID string `json:"parentUUID,omitempty"`
	// PCIBusID is the GPU's PCI address (a MIG partition's parent's).
	PCIBusID string `json:"pciBusID,omitempty"`
	// ProductName is the GPU's model, e.g. "NVIDIA H100 80GB HBM3".
	ProductName string `json:"productName,omitempty"`
	// Minor is the GPU's /dev/nvidia<minor>.
	Minor int `json:"minor"`
	// MIG is set for a MIG partition.
	MIG *MigDeviceStatus `json:"mig,omitempty"`
	// Sharing is set when the device's config asks for time-slicing or
	// MPS.
	Sharing *SharingStatus `json:"sharing,omitempty"`
	// DriverCapabilities are the NVIDIA driver capabilities the
	// containers get (NVIDIA_DRIVER_CAPABILITIES).
	DriverCapabilities []string `json:"driverCapabilities,omitempty"`
	// AdminAccess is set for a device allocated with admin access
	// (monitoring): other claims may use the GPU at the same time.
	AdminAccess bool `json:"adminAccess,omitempty"`
}

// MigDeviceStatus is where a MIG partition is on its GPU.
type MigDeviceStatus struct {
	Profile           string `json:"profile"`
	PlacementStart    int    `json:"placementStart"`
	PlacementSize     int    `json:"placementSize"`
	GPUInstanceID     *int   `json:"gpuInstanceID,omitempty"`
	ComputeInstanceID *int   `json:"computeInstanceID,omitempty"`
}

// SharingStatus is how the claim shares the device, with the limits its
// clients got.
type SharingStatus struct {
	// Strategy is TimeSlicing or MPS.
	Strategy SharingStrategy `json:"strategy"`
	// TimeSliceInterval is the GPU's time slice (TimeSlicing).
	TimeSliceInterval TimeSliceInterval `json:"timeSliceInterval,omitempty"`
	// ActiveThreadPercentage and PinnedDeviceMemoryLimit are the MPS
	// clients' limits, when there are any.
	ActiveThreadPercentage  *int               `json:"activeThreadPercentage,omitempty"`
	PinnedDeviceMemoryLimit *resource.Quantity `json:"pinnedDeviceMemoryLimit,omitempty"`
}

// NewDeviceStatus returns a DeviceStatus with apiVersion and kind set.
func NewDeviceStatus() *DeviceStatus {
	return &DeviceStatus{TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: DeviceStatusKind}}
}

// DecodeDeviceStatus reads status.devices[].data written by gpudra;
// another kind is an error.
func DecodeDeviceStatus(raw []byte) (*DeviceStatus, error) {
	var s DeviceStatus
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s.APIVersion != SchemeGroupVersion.String() || s.Kind != DeviceStatusKind {
		return nil, fmt.Errorf("not a %s/%s: apiVersion %q, kind %q", SchemeGroupVersion, DeviceStatusKind, s.APIVersion, s.Kind)
	}
	return &s, nil
}
