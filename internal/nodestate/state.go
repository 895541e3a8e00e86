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

package nodestate

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/mps"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Hardware is everything the node state needs from the NVML layer (the
// real or fake backend implements it; internal/plugin has the compiler check
// that): what a container needs for each device, the MIG operations that
// create and destroy partitions, and the settings sharing changes (compute
// mode, time slice, how to run an MPS control daemon). Every call names
// the GPU by UUID (indices can change); IDs are NVML's GPU and compute
// instance IDs.
type Hardware interface {
	// CommonEdits is what every container with at least one of this
	// driver's devices needs: control device nodes, and the driver files
	// of the given driver capabilities (NVIDIA_DRIVER_CAPABILITIES values;
	// none means the default, compute and utility).
	CommonEdits(driverCapabilities []string) gpu.Edits
	// DeviceEdits is what a container needs to use one whole GPU.
	DeviceEdits(g gpu.GPU) gpu.Edits
	// MigDeviceEdits is what a container needs to use one MIG device of
	// the parent GPU.
	MigDeviceEdits(parent gpu.GPU, giID, ciID int, migUUID string) (gpu.Edits, error)

	// MigMode reports the current and the pending MIG mode.
	MigMode(uuid string) (current, pending bool, err error)
	// SetMigMode switches MIG mode. Where the change needs a GPU reset
	// (Ampere) the change stays pending and an error says so.
	SetMigMode(uuid string, on bool) error
	// CreateGPUInstance creates a GPU instance of the profile at exactly
	// the placement; a placement that is taken (or overlaps one that is)
	// fails.
	CreateGPUInstance(uuid string, profileID uint32, pl gpu.MigPlacement) (giID int, err error)
	// CreateComputeInstance creates the compute instance that spans the
	// whole GPU instance.
	CreateComputeInstance(uuid string, giID int) (ciID int, err error)
	// MigDeviceUUID returns the MIG-… UUID of a compute instance.
	MigDeviceUUID(uuid string, giID, ciID int) (string, error)
	// DestroyComputeInstance destroys a compute instance; one that is
	// already gone is not an error.
	DestroyComputeInstance(uuid string, giID, ciID int) error
	// DestroyGPUInstance destroys a GPU instance and the compute instances
	// left in it, provided it is the instance of the given profile at the
	// given placement (IDs are reused); one that is gone, or that is now
	// another instance, is left alone and not an error.
	DestroyGPUInstance(uuid string, giID int, profileID uint32, pl gpu.MigPlacement) error
	// MigInstances lists the GPU instances that exist on the GPU (none
	// with MIG mode off).
	MigInstances(uuid string) ([]gpu.MigInstance, error)

	// ComputeMode reports a whole GPU's compute mode.
	ComputeMode(uuid string) (gpu.ComputeMode, error)
	// SetComputeMode sets a whole GPU's compute mode: MPS needs
	// ExclusiveProcess. A GPU in MIG mode accepts only Default.
	SetComputeMode(uuid string, m gpu.ComputeMode) error
	// SetTimeSlice sets a whole GPU's time-slice level, 0 (the driver's
	// default) to 3 (long).
	SetTimeSlice(uuid string, level int) error
	// MPSDaemon is how to run the MPS control daemon of the device with
	// the given UUID (a GPU's or a MIG device's).
	MPSDaemon(deviceUUID string) gpu.DaemonCommand
}

// Options configure a State.
type Options struct {
	// DriverName is the DRA driver name; only allocation results and
	// configs for this driver are handled.
	DriverName string
	// Node is the inventory the plugin published. Its name is the pool.
	Node gpu.Node
	// Hardware supplies container edits, MIG operations and the sharing
	// settings.
	Hardware Hardware
	// CDI writes and removes the per-claim CDI specs.
	CDI *cdispec.Writer
	// NVLinkDomain says the node's multi-node NVLink domain (its GPUs'
	// nvlinkDomain) at the time of a prepare; "" (or nil) when it is in
	// none, and then no IMEX channel is prepared here.
	NVLinkDomain func() string
	// Channels gives containers IMEX channels (the backend); nil refuses
	// channel claims at prepare.
	Channels ChannelDevices
	// IMEX says whether the node's IMEX daemon is ready; nil is
	// AlwaysReady.
	IMEX IMEXReadiness
	// Checkpoint persists prepared claims.
	Checkpoint *checkpoint.Store
	// BootID identifies the current boot; a different boot ID in the
	// checkpoint means the node rebooted since it was written.
	BootID string
	// MPS runs the MPS control daemons (see sharing_mps.go); nil refuses
	// claims that ask for MPS.
	MPS mps.Launcher
	// MPSDir holds one directory per MPS daemon (pipe, log, shm). Like
	// the plugin data dir, it must be the same path inside and outside
	// the plugin's container.
	MPSDir string
	// MPSReadyTimeout is how long a prepare waits for a starting MPS
	// daemon to answer; zero means 60 seconds.
	MPSReadyTimeout time.Duration
	// MPSProbeTimeout is how long a running MPS daemon has to answer a
	// control command before it counts as hung and is replaced; zero
	// means mps.DefaultProbeTimeout.
	MPSProbeTimeout time.Duration
	// ShareSharing is how a claim that holds a share of a GPU (less than
	// all of its memory, through consumable capacity) shares it when its
	// config does not say: the node pool's tier. Nil leaves such claims
	// unshared beyond what the driver does by default.
	ShareSharing *configapi.Sharing
	// SharesPublished reports whether the node publishes its whole GPUs
	// as shareable (consumable capacity): only then can an allocation
	// hold a share of one. Nil means never.
	SharesPublished func() bool
	// Hooks inject faults in tests; nil hooks do nothing.
	Hooks Hooks
}

// Hooks let tests stop a prepare at the points where a real plugin can die.
//
// Each hook's non-nil error ends Prepare on the spot, with no rollback,
// exactly as if the process had been killed there.
type Hooks struct {
	// AfterPrepareStarted runs once PrepareStarted is on disk and before
	// anything is created.
	AfterPrepareStarted func(claimUID string) error
	// AfterMigModeEnabled runs once MIG mode was switched on for a claim.
	AfterMigModeEnabled func(claimUID, gpuUUID string) error
	// AfterGPUInstanceCreated runs once a MIG device's GPU instance
	// exists, before its ID is recorded.
	AfterGPUInstanceCreated func(claimUID, device string) error
	// AfterComputeInstanceCreated runs once its compute instance exists,
	// before its ID is recorded.
	AfterComputeInstanceCreated func(claimUID, device string) error
	// BeforePrepareCompleted runs once the CDI spec is written, before
	// PrepareCompleted is.
	BeforePrepareCompleted func(claimUID string) error
	// AfterMigDeviceDestroyed runs in Unprepare once a MIG device is
	// destroyed, before the next one is (or the claim is forgotten).
	AfterMigDeviceDestroyed func(claimUID, device string) error
	// BeforeCheckpointWrite runs before each write of the checkpoint (a
	// batch of changes, possibly of several claims); an error is a crash
	// before the batch reaches the disk. Every operation waiting for the
	// batch stops on the spot.
	BeforeCheckpointWrite func() error
	// AfterCheckpointWrite runs once a batch is on disk, before the
	// operations waiting for it go on; an error is a crash at that point.
	AfterCheckpointWrite func() error
	// AfterSharingStep runs after each step of setting up or tearing
	// down sharing (SharingSteps in sharing.go), with the claim on whose
	// behalf it ran.
	AfterSharingStep func(claimUID, step string) error
}

// State is the node's prepared claims. It is safe for concurrent use: claims
// are prepared concurrently. Every change to the checkpoint is made in
// memory under one mutex and then written with the changes of the other
// claims that arrived meanwhile (commit.go).
type State struct {
	opts Options

	// mu guards cp and the generations in commits (commits.gen, pending,
	// durable).
	mu sync.Mutex
	cp *checkpoint.Checkpoint
	// commits makes changes to cp durable, in batches.
	commits commits

	// onDisk is set once the checkpoint file is known to exist
	// (checkpointOnDisk); it is never cleared.
	onDisk atomic.Bool

	// claimLocks serialize, per claim UID, a claim's whole Prepare,
	// Unprepare, rollback or spec repair (doc.go: the lock order).
	claimLocks keyedMutex
	// gpuLocks serialize, per GPU UUID, every change of a GPU's hardware
	// state: MIG mode and instances, compute mode, time slice, its MPS
	// daemon (doc.go: the lock order).
	gpuLocks keyedMutex
}

// ClaimRef names a ResourceClaim.
type ClaimRef struct {
	UID       string
	Namespace string
	Name      string
}

func (c ClaimRef) String() string {
	return fmt.Sprintf("ResourceClaim %s/%s (UID %s)", c.Namespace, c.Name, c.UID)
}

// PreparedDevice is one allocated device as the kubelet needs it.
type PreparedDevice struct {
	Requests     []string
	Pool         string
	Device       string
	CDIDeviceIDs []string
	// MigUUID is the MIG device's "MIG-…" UUID, for a MIG placement (known
	// only once it was created).
	MigUUID string
}

// New loads the checkpoint and returns the node state. It does not touch
// hardware or CDI specs; call Reconcile for that. A corrupt checkpoint is an
// error, and so is a missing one on a node that holds CDI specs of this
// driver: the plugin must not start and forget what it prepared.
func New(opts Options) (*State, error) {
	if opts.DriverName == "" || opts.Node.Name == "" || opts.Hardware == nil || opts.CDI == nil || opts.Checkpoint == nil {
		return nil, errors.New("nodestate: DriverName, Node.Name, Hardware, CDI and Checkpoint are required")
	}
	exists, err := opts.Checkpoint.Exists()
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := checkNothingPrepared(opts); err != nil {
			return nil, err
		}
	}
	cp, err := opts.Checkpoint.Load()
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]checkpoint.Claim{}
	}
	migrateComputeModes(cp)
	s := &State{opts: opts, cp: cp}
	s.onDisk.Store(exists)
	s.commits.durable = cp.Clone()
	s.commits.cond = sync.NewCond(&s.commits.mu)
	s.commits.maxGather = defaultMaxGather
	return s, nil
}

// sharesPublished reports whether the node's GPUs are published as
// shareable.
func (o *Options) sharesPublished() bool {
	return o.SharesPublished != nil && o.SharesPublished()
}

// nvlinkDomain is the node's NVLink domain now ("" in none).
func (o *Options) nvlinkDomain() string {
	if o.NVLinkDomain == nil {
		return ""
	}
	return o.NVLinkDomain()
}

// PreparedClaims returns the UIDs of the claims currently recorded, with
// their state.
func (s *State) PreparedClaims() map[string]checkpoint.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]checkpoint.State, len(s.cp.Claims))
	for uid, c := range s.cp.Claims {
		out[uid] = c.State
	}
	return out
}

// putClaimLocked records a copy of c under uid (or, with c nil, forgets
// uid) in memory and returns the generation to commit. If the write fails,
// the entry is put back as it was: saves are atomic, so the file still
// holds the old entry, and memory must never record more than the file. (A
// PrepareCompleted held only in memory would make the kubelet's retry
// succeed, and the next start-up would then roll back a claim whose
// containers are running.)
//
// The old entry is restored by hand rather than by reloading the file: a
// reload that fails too (the error that broke the save often breaks the
// read) would leave the change in memory and make the Store refuse every
// later save. The caller holds s.mu and the claim's lock.
func (s *State) putClaimLocked(uid string, c *checkpoint.Claim) uint64 {
	prev, had := s.cp.Claims[uid]
	if c == nil {
		delete(s.cp.Claims, uid)
	} else {
		s.cp.Claims[uid] = c.Clone()
	}
	return s.changedLocked(func() {
		if had {
			s.cp.Claims[uid] = prev
		} else {
			delete(s.cp.Claims, uid)
		}
	})
}

// putClaim is putClaimLocked followed by its commit. The caller holds the
// claim's lock, not s.mu.
func (s *State) putClaim(uid string, c *checkpoint.Claim) error {
	s.mu.Lock()
	gen := s.putClaimLocked(uid, c)
	s.mu.Unlock()
	return s.commit(gen)
}

func toPrepared(devs []checkpoint.Device) []PreparedDevice {
	out := make([]PreparedDevice, 0, len(devs))
	for _, d := range devs {
		out = append(out, PreparedDevice{
			Requests:     append([]string(nil), d.Requests...),
			Pool:         d.Pool,
			Device:       d.Device,
			CDIDeviceIDs: append([]string(nil), d.CDIDeviceIDs...),
		})
		if d.Mig != nil {
			out[len(out)-1].MigUUID = d.Mig.UUID
		}
	}
	return out
}

// GPUsInUse returns, by GPU UUID, how the claims recorded on this node hold
// the GPUs: through the whole-GPU device (alone or as shares of it), or
// through MIG partitions. Devices with admin access are left out: they
// take nothing from other claims. The plugin publishes from it: a GPU held
// through its whole device has no placement anyone could be given, and one
// whose partitions are held has no whole device anyone could be given.
func (s *State) GPUsInUse() map[string]gpu.Use {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]gpu.Use{}
	for _, c := range s.cp.Claims {
		for _, d := range c.Devices {
			switch {
			case d.AdminAccess, d.Channel != nil:
			case d.Mig != nil:
				out[d.GPUUUID] = gpu.UsedByMIG
			default:
				out[d.GPUUUID] = gpu.UsedWhole
			}
		}
	}
	return out
}
