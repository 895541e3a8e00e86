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

import "encoding/json"

// Version is the checkpoint format this gpudra reads and writes.
const Version = "v1"

// Checkpoint is everything the node remembers about prepared claims.
type Checkpoint struct {
	// Version of the format; Save always writes Version.
	Version string `json:"version"`
	// BootID is the kernel's boot ID when the checkpoint was written. A
	// different boot ID at start-up means the node rebooted: MIG instances,
	// sharing daemons and CDI specs under /var/run are gone and must be
	// recreated for the claims still prepared.
	BootID string `json:"bootID"`
	// Claims by claim UID.
	Claims map[string]Claim `json:"claims"`
	// MigModeEnabled lists, by UUID, the GPUs whose MIG mode gpudra turned
	// on (recorded just before it does): it turns MIG mode off again once
	// no claim uses the GPU. GPUs an admin put in MIG mode are not listed
	// and stay as they are.
	MigModeEnabled []string `json:"migModeEnabled,omitempty"`
	// MPSDaemons are the MPS control daemons gpudra runs, by ID (see
	// sharing.go).
	MPSDaemons map[string]MPSDaemon `json:"mpsDaemons,omitempty"`
	// ComputeModes are, by GPU UUID, the compute modes the GPUs had before
	// gpudra first set them to exclusive-process for an MPS daemon
	// (recorded just before it does). An entry is forgotten only once
	// the mode is restored, so while a GPU is listed its current mode is
	// gpudra's and never taken for the mode to restore, whatever happens
	// to its daemon's record.
	ComputeModes map[string]int `json:"computeModes,omitempty"`
	// TimeSlices are the time-slice levels gpudra set, by GPU UUID
	// (recorded just before it does): the GPU goes back to the default
	// once no claim asks for the level.
	TimeSlices map[string]int `json:"timeSlices,omitempty"`
	// MigPublished lists, by UUID and sorted, the GPUs whose MIG
	// placements the plugin published (recorded before it publishes
	// them): the scheduler may have allocated one of them to a claim
	// that has not reached the node, so they stay published across
	// plugin restarts and wipes of the node's ResourceSlices. A GPU
	// leaves the list only once a claim prepared on the node holds it
	// whole (the scheduler allocated it whole, which the published
	// placements' counters allow only while no claim holds one of them).
	// Absent in checkpoints written before it was recorded: a plugin
	// reading one falls back on the slices the API server holds.
	MigPublished []string `json:"migPublished,omitempty"`
}

// New returns an empty checkpoint of the current version.
func New(bootID string) *Checkpoint {
	return &Checkpoint{Version: Version, BootID: bootID, Claims: map[string]Claim{}}
}

// State is how far the preparation of a claim got.
type State string

const (
	// PrepareStarted is recorded before any device is touched, so that
	// after a crash the plugin knows there may be half-done work to roll
	// back or finish.
	PrepareStarted State = "PrepareStarted"
	// PrepareCompleted is recorded once every device of the claim is ready
	// and its CDI spec is written.
	PrepareCompleted State = "PrepareCompleted"
	// UnprepareStarted is recorded before a claim's MIG devices are
	// destroyed and its sharing (MPS daemon, time slice) released: a
	// plugin that dies half-way finishes the job at its next start
	// instead of recreating what was already gone. (Older gpudra
	// versions treat it like PrepareStarted, which rolls back the same way.)
	UnprepareStarted State = "UnprepareStarted"
)

// Known reports whether this gpudra knows what the state means. A state it
// does not know was written by a newer gpudra (before a downgrade): the
// claim must be kept as it is, since its containers may be running, and
// reported, never rolled back.
func (s State) Known() bool {
	switch s {
	case PrepareStarted, PrepareCompleted, UnprepareStarted:
		return true
	}
	return false
}

// Claim is one ResourceClaim prepared (or being prepared) on this node.
type Claim struct {
	// UID of the ResourceClaim; also the key in Checkpoint.Claims.
	UID string `json:"uid"`
	// Namespace and Name of the ResourceClaim, for logs and for admins
	// reading the file; the UID is what identifies it.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is how far preparation got.
	State State `json:"state"`
	// Devices are this driver's devices in the claim's allocation.
	Devices []Device `json:"devices,omitempty"`
}

// Device is one allocated device of a claim and what was done for it.
//
// New fields must be optional (omitempty) and must mean "nothing was done"
// when absent, so that checkpoints written before them still read correctly.
type Device struct {
	// Requests are the claim's request names this device was allocated for.
	Requests []string `json:"requests"`
	// Pool and Device name the device in the ResourceSlice.
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// GPUUUID is the physical GPU (for a MIG device, its parent): unlike the
	// device name it cannot come to mean another GPU after hardware changes.
	GPUUUID string `json:"gpuUUID"`
	// CDIDeviceIDs are the fully qualified CDI device IDs returned to the
	// kubelet for this device; a repeated prepare returns them again.
	CDIDeviceIDs []string `json:"cdiDeviceIDs,omitempty"`
	// Config is the effective opaque configuration (resource.gpudra.io)
	// the device was prepared with, as JSON; read it back with
	// v1alpha1.DecodeNonStrict. Empty when the claim had none.
	Config json.RawMessage `json:"config,omitempty"`
	// AdminAccess is set when the device was allocated with admin access
	// (monitoring): such a device may be prepared for several claims.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// Env is the claim-level environment this device carries in its CDI
	// edits (NVIDIA_VISIBLE_DEVICES for its request, the config's driver
	// capabilities), so a spec rewritten after a reboot is identical to
	// the first.
	Env []string `json:"env,omitempty"`
	// Mig is set for a MIG partition: where it is and how far its creation
	// got, written before and after each step.
	Mig *MigDevice `json:"mig,omitempty"`
	// Channel is set for an IMEX channel of a multi-node NVLink domain: a
	// device of the domain's pool (Pool "nvlink/<domain>"), not of the
	// node's; it has no GPU, so GPUUUID is empty.
	Channel *IMEXChannel `json:"channel,omitempty"`
	// ShareID is set when the device was allocated as one share of a
	// device that allows multiple allocations (consumable capacity):
	// other claims may hold other shares of it.
	ShareID string `json:"shareID,omitempty"`
	// ShareMemoryBytes and ShareMultiprocessors are what the claim's
	// shares take of the device's capacity (with ShareID; a claim given
	// several shares of one GPU holds it once, with their sum). The
	// prepare of another share checks that the shares of a GPU fit in it.
	// Zero in records written before they were recorded.
	ShareMemoryBytes     int64 `json:"shareMemoryBytes,omitempty"`
	ShareMultiprocessors int64 `json:"shareMultiprocessors,omitempty"`
	// Sharing is set when the claim's config asked for time-slicing or
	// MPS on the device.
	Sharing *DeviceSharing `json:"sharing,omitempty"`
}

// MigStep is the MIG creation step a device is in. Each is recorded before
// the NVML call it names, so that after a crash the plugin knows an
// instance may exist that the checkpoint has no ID for.
type MigStep string

const (
	// MigCreatingGPUInstance: the GPU instance is being created.
	MigCreatingGPUInstance MigStep = "CreatingGPUInstance"
	// MigCreatingComputeInstance: the GPU instance exists (its ID is
	// recorded); the compute instance is being created.
	MigCreatingComputeInstance MigStep = "CreatingComputeInstance"
	// MigCreated: both exist and their IDs and the MIG device UUID are
	// recorded.
	MigCreated MigStep = "Created"
)

// IMEXChannel is the IMEX channel a device is: its NVLink domain and its
// number (the minor of its device node).
type IMEXChannel struct {
	Domain string `json:"domain"`
	Number int    `json:"number"`
}

// MigDevice is a MIG partition gpudra creates for a claim.
type MigDevice struct {
	// Profile name and NVML GPU instance profile ID.
	Profile   string `json:"profile"`
	ProfileID uint32 `json:"profileID"`
	// PlacementStart and PlacementSize, in memory slices.
	PlacementStart int `json:"placementStart"`
	PlacementSize  int `json:"placementSize"`
	// Step is how far creation got; empty means nothing was attempted.
	Step MigStep `json:"step,omitempty"`
	// GPUInstanceID and ComputeInstanceID are set once created.
	GPUInstanceID     *int `json:"gpuInstanceID,omitempty"`
	ComputeInstanceID *int `json:"computeInstanceID,omitempty"`
	// UUID is the MIG device's UUID ("MIG-…").
	UUID string `json:"uuid,omitempty"`
}
