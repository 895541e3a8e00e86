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

package claimplan

import "fmt"

// Kind classifies a refusal.
type Kind string

// The refusals Plan, HeldConflict and OverSubscribed make.
const (
	// NotAllocated: the claim has no allocation.
	NotAllocated Kind = "not-allocated"
	// ForeignPool: a device of the allocation is in another node's pool.
	ForeignPool Kind = "foreign-pool"
	// UnknownDevice: the node has no such device (removed since the
	// claim was allocated).
	UnknownDevice Kind = "unknown-device"
	// MonitorWithoutAdmin: a monitoring device allocated without admin
	// access.
	MonitorWithoutAdmin Kind = "monitor-without-admin"
	// InvalidConfig: an opaque config of the driver does not decode or
	// validate.
	InvalidConfig Kind = "invalid-config"
	// ConfigKind: the config a device gets is not of its kind (a
	// GpuConfig for a MIG partition, or the other way round).
	ConfigKind Kind = "config-kind"
	// OverlapWithinClaim: devices of one claim overlap (one device twice,
	// a GPU beside its partition, overlapping partitions).
	OverlapWithinClaim Kind = "overlap-within-claim"
	// MPSUnavailable: MPS asked for on a node that runs no MPS daemons.
	MPSUnavailable Kind = "mps-unavailable"
	// MPSLimitKey: a perDevicePinnedMemoryLimits key that names no MPS
	// device of the claim.
	MPSLimitKey Kind = "mps-limit-key"
	// MPSMultipleDevices: MPS on more than one device of a claim.
	MPSMultipleDevices Kind = "mps-multiple-devices"
	// SharesDiffer: two shares of one GPU in one claim (which the claim
	// gets as one device) with different configs.
	SharesDiffer Kind = "shares-differ"
	// InvalidShare: a share the node never offered: on a node that
	// publishes its GPUs exclusive, of a MIG partition, of no memory,
	// less than the smallest share or more than the GPU has.
	InvalidShare Kind = "invalid-share"
	// ShareOverSubscribed: a share that does not fit in its GPU beside
	// the shares other claims hold.
	ShareOverSubscribed Kind = "share-over-subscribed"
	// HeldByOther: a device (or an overlapping one) that another claim
	// holds exclusively.
	HeldByOther Kind = "held-by-other"
	// SharingConflict: a share of a GPU whose sharing disagrees with the
	// sharing of another claim's share (MPS beside no MPS, two time-slice
	// intervals).
	SharingConflict Kind = "sharing-conflict"
	// ForeignDomain: an IMEX channel of another NVLink domain's pool than
	// the node's, or a channel on a node in no domain.
	ForeignDomain Kind = "foreign-domain"
	// ChannelMisuse: an IMEX channel allocated with admin access or given
	// a gpudra config, neither of which a channel has a meaning for.
	ChannelMisuse Kind = "channel-misuse"
)

// The refusals the node state makes after the plan, where hardware or the
// node's files answer. Plan never returns them; the node state wraps the
// errors of those steps in them (Wrap), so that every error of a prepare
// has a Kind.
const (
	// UnknownRecord: the checkpoint records the claim in a state of a
	// newer gpudra.
	UnknownRecord Kind = "unknown-record"
	// RollbackFailed: undoing an earlier, unfinished attempt failed.
	RollbackFailed Kind = "rollback-failed"
	// MIGSetup: creating the MIG partition failed (NVML: placement taken
	// by an instance gpudra did not make, MIG mode pending a reset).
	MIGSetup Kind = "mig-setup"
	// WholeGPUSetup: a whole GPU could not be made ready (MIG mode could
	// not be switched off).
	WholeGPUSetup Kind = "whole-gpu-setup"
	// SharingSetup: setting up sharing failed (the MPS daemon did not
	// start or answer, NVML refused the time slice or compute mode).
	SharingSetup Kind = "sharing-setup"
	// CDISpec: the claim's CDI spec could not be written.
	CDISpec Kind = "cdi-spec"
	// CheckpointWrite: the checkpoint could not be written.
	CheckpointWrite Kind = "checkpoint-write"
)

// KindInfo says what gpudra check can know of one kind of refusal.
type KindInfo struct {
	Kind Kind
	// Checkable: gpudra check (and gpudra simulate) can meet it on the
	// allocations the scheduler makes; a corpus case shows it.
	Checkable bool
	// Why check cannot know it, when it cannot.
	Why string
}

// Kinds are all the refusals a prepare can end in. The offline checks
// cover every checkable one (a test of internal/check holds a corpus case for
// each); the others need a stale or hand-written allocation, the node's
// hardware, or its files.
var Kinds = []KindInfo{
	{Kind: NotAllocated, Why: "the kubelet prepares allocated claims only: a claim without an allocation reaches the plugin only through a bug"},
	{Kind: ForeignPool, Why: "the scheduler allocates a claim's devices on the pod's node, and the kubelet sends the plugin only its node's claims: needs a stale or hand-written allocation"},
	{Kind: UnknownDevice, Why: "needs a GPU that left the node (or a plugin restarted with other hardware) after the claim was allocated"},
	{Kind: MonitorWithoutAdmin, Checkable: true},
	{Kind: InvalidConfig, Checkable: true},
	{Kind: ConfigKind, Checkable: true},
	{Kind: OverlapWithinClaim, Why: "the scheduler never allocates overlapping devices to one claim (the counters forbid it): needs a stale or hand-written allocation"},
	{Kind: MPSUnavailable, Checkable: true},
	{Kind: MPSLimitKey, Checkable: true},
	{Kind: MPSMultipleDevices, Checkable: true},
	{Kind: SharesDiffer, Checkable: true},
	{Kind: InvalidShare, Why: "the scheduler hands out only the shares a node publishes, within the sizes its request policy allows: needs a stale or hand-written allocation"},
	{Kind: ShareOverSubscribed, Why: "the scheduler accounts for the shares of a GPU it hands out: needs a stale or hand-written allocation, or a claim prepared on the node that the API server no longer shows"},
	{Kind: HeldByOther, Why: "the scheduler never allocates a device that another claim holds exclusively: needs a stale allocation, or a claim prepared on the node that the API server no longer shows"},
	{Kind: SharingConflict, Checkable: true},
	{Kind: ForeignDomain, Why: "the domain pool's node selector keeps its channels on the domain's nodes: needs a stale allocation, or a node whose GPUs changed domain since its label was read"},
	{Kind: ChannelMisuse, Checkable: true},
	{Kind: UnknownRecord, Why: "needs the node's checkpoint, written by a newer gpudra"},
	{Kind: RollbackFailed, Why: "needs the node's hardware or files to fail while an earlier attempt is undone"},
	{Kind: MIGSetup, Why: "needs the GPU: NVML refuses a placement that an instance gpudra did not make holds, or MIG mode waits for a reset"},
	{Kind: WholeGPUSetup, Why: "needs the GPU: MIG mode cannot be switched off while instances gpudra did not make exist"},
	{Kind: SharingSetup, Why: "needs the node: the MPS daemon's pod or process, NVML's time-slice and compute-mode calls"},
	{Kind: CDISpec, Why: "needs the node's file system (/var/run/cdi)"},
	{Kind: CheckpointWrite, Why: "needs the node's file system (the plugin's data directory)"},
}

// Refusal is why the node does not prepare a claim.
type Refusal struct {
	Kind Kind
	// Request and Device name the allocation result the refusal is about
	// ("" for one about the whole claim).
	Request string
	Device  string
	// Config is where the config the refusal is about is written, when it
	// is about one.
	Config *ConfigRef
	// Static: the config alone is refused, whatever the allocation
	// (DecodeConfig fails on it): the admission webhook denies it.
	Static bool
	// Other names the claim that holds the device (HeldByOther,
	// SharingConflict): "ResourceClaim default/a (UID …)".
	Other string
	// Msg says it without naming the claim, which the caller does.
	Msg string
	// Err is the underlying error (a config's decoding, a hardware step).
	Err error
}

// ConfigRef locates a config: in the claim's spec.devices.config, or in
// the DeviceClass of the request.
type ConfigRef struct {
	// FromClass: the config comes from the request's DeviceClass, Class
	// ("" when the claim does not say which).
	FromClass bool
	Class     string
	// Index is the entry of the claim's spec.devices.config (-1 when
	// unknown, or for a class config).
	Index int
	// Parameters are the config's raw parameters, to find it by.
	Parameters []byte
}

// String says where the config is, as a user would look for it.
func (c *ConfigRef) String() string {
	switch {
	case c == nil:
		return ""
	case c.FromClass && c.Class != "":
		return fmt.Sprintf("config of DeviceClass %q", c.Class)
	case c.FromClass:
		return "config of the DeviceClass"
	case c.Index >= 0:
		return fmt.Sprintf("spec.devices.config[%d].opaque", c.Index)
	}
	return "config of the claim"
}

func (r *Refusal) Error() string { return r.Msg }

func (r *Refusal) Unwrap() error { return r.Err }

func refuse(kind Kind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies an error of a step after the plan (one of the kinds
// that need the node); nil stays nil.
func Wrap(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Refusal{Kind: kind, Msg: err.Error(), Err: err}
}
