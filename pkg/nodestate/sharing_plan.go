package nodestate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/checkpoint"
	"github.com/gpudra/gpudra/pkg/gpu"
)

// Capacity names that consumable capacity shares a whole GPU by (the slice
// builder publishes them; a test keeps the two in step).
const (
	capacityMemory          resourceapi.QualifiedName = "memory"
	capacityMultiprocessors resourceapi.QualifiedName = "multiprocessors"
)

// Where a claim's MPS clients find their control daemon, inside the
// container: the MPS defaults, so that tools that ignore the environment
// find it too.
const (
	mpsPipeDirInContainer = "/tmp/nvidia-mps"
	mpsLogDirInContainer  = "/var/log/nvidia-mps"
	mpsShmInContainer     = "/dev/shm"
)

// Environment variables of an MPS client.
const (
	envMPSPipeDir      = "CUDA_MPS_PIPE_DIRECTORY"
	envMPSLogDir       = "CUDA_MPS_LOG_DIRECTORY"
	envMPSThreads      = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	envMPSPinnedMemory = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
)

// planSharing turns the sharing section of each planned device's config
// into what the node records and sets up for it, and refuses what cannot
// work before anything is recorded:
//
//   - MPS on more than one device of a claim: a client process connects
//     to one MPS control daemon, and gpudra runs one per device;
//   - MPS on a node that runs no MPS launcher;
//   - a per-device limit keyed by something that is not the claim's MPS
//     device.
//
// The MPS limits are the config's, capped by the claim's share of the
// device's capacity (consumable capacity): with MPS, the share is
// enforced.
func (s *State) planSharing(ref ClaimRef, planned []plannedDevice) error {
	var mpsDevices []string
	for i := range planned {
		p := &planned[i]
		sh := sharingOf(p.config)
		if sh == nil && partialShare(*p) {
			sh = s.opts.ShareSharing
		}
		switch {
		case sh.IsTimeSlicing():
			p.sharing = &checkpoint.DeviceSharing{Strategy: checkpoint.SharingTimeSlicing, TimeSlice: sh.Interval().Level()}
		case sh.IsMPS():
			if !slices.Contains(mpsDevices, p.result.Device) {
				mpsDevices = append(mpsDevices, p.result.Device)
			}
			if s.opts.MPS == nil {
				return fmt.Errorf("%s: request %q: device %s: MPS is not available: this plugin runs no MPS daemon launcher", ref, p.result.Request, p.result.Device)
			}
			threads, pinned, err := mpsLimits(*p, sh.MPS)
			if err != nil {
				return fmt.Errorf("%s: request %q: device %s: %w", ref, p.result.Request, p.result.Device, err)
			}
			p.sharing = &checkpoint.DeviceSharing{
				Strategy:               checkpoint.SharingMPS,
				MPSDaemon:              p.result.Device,
				ActiveThreadPercentage: threads,
				PinnedMemoryMiB:        pinned,
			}
		}
	}
	if len(mpsDevices) > 1 {
		return fmt.Errorf("%s: MPS on devices %s: a claim may use MPS on one device only, because a client process connects to one MPS control daemon and gpudra runs one per device; use one claim per shared GPU",
			ref, strings.Join(mpsDevices, ", "))
	}
	return nil
}

// partialShare reports whether the device was allocated as a share of a
// GPU smaller than the whole: the claims that the node pool's sharing
// applies to. A share of all the memory is the whole GPU, used alone.
func partialShare(p plannedDevice) bool {
	if p.result.ShareID == nil || p.mig != nil {
		return false
	}
	mem, ok := p.result.ConsumedCapacity[capacityMemory]
	return ok && mem.Value() < int64(min(p.gpu.MemoryBytes, math.MaxInt64))
}

// mpsLimits returns the active thread percentage and the pinned memory
// limit in MiB (zero: no limit) of a claim's MPS device.
func mpsLimits(p plannedDevice, cfg *configapi.MPSConfig) (int, int64, error) {
	threads := 0
	var pinned *resource.Quantity
	if cfg != nil {
		if cfg.DefaultActiveThreadPercentage != nil {
			threads = int(*cfg.DefaultActiveThreadPercentage)
		}
		pinned = cfg.DefaultPinnedDeviceMemoryLimit
		for key, q := range cfg.PerDevicePinnedMemoryLimits {
			// The claim's one MPS device is CUDA ordinal 0 in its
			// containers.
			if key != "0" && (p.mig != nil || key != p.gpu.UUID) {
				return 0, 0, fmt.Errorf("sharing.mps.perDevicePinnedMemoryLimits: key %q names no MPS device of this claim: its one MPS device is CUDA ordinal \"0\"%s",
					key, uuidHint(p))
			}
			q := q
			pinned = &q
		}
	}
	var pinnedMiB int64
	if pinned != nil {
		pinnedMiB = pinned.Value() >> 20
	}

	// The claim's share of the device, when it was allocated one.
	if mem, ok := p.result.ConsumedCapacity[capacityMemory]; ok {
		share := mem.Value() >> 20
		if share > 0 && (pinnedMiB == 0 || share < pinnedMiB) {
			pinnedMiB = share
		}
	}
	if sms, ok := p.result.ConsumedCapacity[capacityMultiprocessors]; ok && p.mig == nil && p.gpu.Multiprocessors > 0 {
		if n := sms.Value(); n > 0 {
			share := int(math.Ceil(100 * float64(n) / float64(p.gpu.Multiprocessors)))
			share = min(share, 100)
			if threads == 0 || share < threads {
				threads = share
			}
		}
	}
	return threads, pinnedMiB, nil
}

func uuidHint(p plannedDevice) string {
	if p.mig != nil {
		return ""
	}
	return " or " + p.gpu.UUID
}

// mpsEnv is what an MPS client needs in its environment: where the
// daemon's pipes are, and its limits.
func mpsEnv(sh *checkpoint.DeviceSharing) []string {
	env := []string{envMPSPipeDir + "=" + mpsPipeDirInContainer, envMPSLogDir + "=" + mpsLogDirInContainer}
	if sh.ActiveThreadPercentage > 0 {
		env = append(env, envMPSThreads+"="+strconv.Itoa(sh.ActiveThreadPercentage))
	}
	if sh.PinnedMemoryMiB > 0 {
		env = append(env, fmt.Sprintf("%s=0=%dM", envMPSPinnedMemory, sh.PinnedMemoryMiB))
	}
	return env
}

// sharingEdits are the mounts an MPS client needs: the daemon's pipe
// directory (read-write: clients create their own pipes there), its log
// directory (read-only), and its /dev/shm, through which MPS passes memory
// between the server and its clients.
func (s *State) sharingEdits(d checkpoint.Device) gpu.Edits {
	if d.Sharing == nil || d.Sharing.Strategy != checkpoint.SharingMPS {
		return gpu.Edits{}
	}
	dm := s.daemonFor(d.Sharing.MPSDaemon, "")
	rw := []string{"rw", "nosuid", "nodev", "bind"}
	return gpu.Edits{Mounts: []gpu.Mount{
		{HostPath: dm.PipeDir(), ContainerPath: mpsPipeDirInContainer, Options: rw},
		{HostPath: dm.LogDir(), ContainerPath: mpsLogDirInContainer, Options: []string{"ro", "nosuid", "nodev", "bind"}},
		{HostPath: dm.ShmDir(), ContainerPath: mpsShmInContainer, Options: rw},
	}}
}

// sharingConflict says why a device another claim holds cannot be shared
// with the planned one, or "" when it can: MPS puts the GPU in
// exclusive-process compute mode, which locks out clients that do not go
// through the daemon, and the time slice is one setting per GPU.
func sharingConflict(p plannedDevice, other checkpoint.Device) string {
	mine, theirs := p.sharing, other.Sharing
	isMPS := func(s *checkpoint.DeviceSharing) bool { return s != nil && s.Strategy == checkpoint.SharingMPS }
	switch {
	case isMPS(mine) && !isMPS(theirs):
		return "it uses the device without MPS, which MPS would lock out (compute mode exclusive-process)"
	case !isMPS(mine) && isMPS(theirs):
		return "it shares the device through MPS, so every claim on it must use MPS too (sharing.strategy: MPS)"
	case mine != nil && theirs != nil && mine.Strategy == checkpoint.SharingTimeSlicing && theirs.Strategy == checkpoint.SharingTimeSlicing &&
		mine.TimeSlice != theirs.TimeSlice:
		return fmt.Sprintf("it set the GPU's time-slice interval to %s, and this claim asks for %s; claims sharing a GPU must ask for the same interval",
			intervalName(theirs.TimeSlice), intervalName(mine.TimeSlice))
	}
	return ""
}

func intervalName(level int) string {
	if level >= 0 && level < len(configapi.SupportedTimeSliceIntervals) {
		return configapi.SupportedTimeSliceIntervals[level]
	}
	return strconv.Itoa(level)
}
