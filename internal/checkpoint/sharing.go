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

package checkpoint

// What GPU sharing changes on the node, recorded before it is changed so
// that a plugin that dies half-way can finish or undo it at its next start.

// Sharing strategies of a device, as recorded. They are the config API's
// values (configapi.SharingStrategy), kept as plain strings here so that
// the file format does not depend on the API package: a rename there must
// not change what old checkpoints mean. TestEveryStrategyIsComplete
// (internal/nodestate) checks that the two lists agree.
const (
	SharingTimeSlicing = "TimeSlicing"
	SharingMPS         = "MPS"
)

// SharingStrategies lists every strategy a record may name.
var SharingStrategies = []string{SharingTimeSlicing, SharingMPS}

// DeviceSharing is how a claim shares one of its devices.
type DeviceSharing struct {
	// Strategy is SharingTimeSlicing or SharingMPS.
	Strategy string `json:"strategy"`
	// TimeSlice is the time-slice level the claim asked for (0 default
	// to 3 long), with TimeSlicing.
	TimeSlice int `json:"timeSlice,omitempty"`
	// MPSDaemon is the ID of the MPS control daemon the device's clients
	// connect to (a key of Checkpoint.MPSDaemons), with MPS. The claims
	// that name a daemon are its references: it runs while one does.
	MPSDaemon string `json:"mpsDaemon,omitempty"`
	// ActiveThreadPercentage and PinnedMemoryMiB are the claim's MPS
	// client limits (zero: none), from its config and its share of the
	// device's capacity; its containers get them in their environment.
	ActiveThreadPercentage int   `json:"activeThreadPercentage,omitempty"`
	PinnedMemoryMiB        int64 `json:"pinnedMemoryMiB,omitempty"`
}

// DaemonState is how far starting or stopping an MPS daemon got.
type DaemonState string

const (
	// DaemonStarting is recorded before the compute mode is changed and
	// the daemon launched.
	DaemonStarting DaemonState = "Starting"
	// DaemonRunning is recorded once the daemon answers on its control
	// socket.
	DaemonRunning DaemonState = "Running"
	// DaemonStopping is recorded before the daemon is stopped, its
	// directories removed and the compute mode restored.
	DaemonStopping DaemonState = "Stopping"
)

// MPSDaemon is an MPS control daemon gpudra runs for one device.
type MPSDaemon struct {
	// ID is the device name (gpu-0, gpu-0-mig-1g10gb-3).
	ID string `json:"id"`
	// GPUUUID is the physical GPU; DeviceUUID what the daemon serves
	// (the GPU's UUID, or the MIG device's, which changes when a reboot
	// makes gpudra recreate the partition).
	GPUUUID    string `json:"gpuUUID"`
	DeviceUUID string `json:"deviceUUID"`
	// Dir holds the daemon's pipe, log and shm directories.
	Dir   string      `json:"dir"`
	State DaemonState `json:"state"`
	// PreviousComputeMode is the GPU's compute mode before gpudra set it
	// to exclusive-process for the daemon; unset for a MIG device (MIG
	// GPUs keep the default compute mode). Checkpoint.ComputeModes is
	// what gpudra restores; this copy is for gpudra versions that predate
	// it (a downgrade), and is read only from checkpoints they wrote.
	PreviousComputeMode *int `json:"previousComputeMode,omitempty"`
}
