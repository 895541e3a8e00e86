package nodestate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/checkpoint"
	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/mps"
)

// MPS: one control daemon per shared device (a whole GPU or a MIG device),
// named after the device. The claims whose records name the daemon are
// its references: the first one to be prepared starts it, the last one to
// go stops it. Every step is recorded in the checkpoint before it is
// taken, so that a plugin that dies half-way finishes or undoes it at its
// next start, and never leaks a daemon, its directories or a changed
// compute mode:
//
//	start: record Starting (with the GPU's compute mode) → create the
//	       directories and set exclusive-process → launch → ready: Running
//	stop:  record Stopping → stop the daemon → remove the directories and
//	       restore the compute mode → forget the daemon
//
// A whole GPU is set to exclusive-process compute mode while its daemon
// runs, so that every client goes through MPS; a GPU in MIG mode keeps the
// default compute mode (NVML refuses any other), and its MIG devices' daemons
// share it.

// Steps of starting and stopping a daemon, for Hooks.AfterSharingStep.
const (
	StepDaemonRecorded       = "MPSDaemonRecorded"
	StepComputeModeSet       = "ComputeModeSet"
	StepDaemonLaunched       = "MPSDaemonLaunched"
	StepDaemonReady          = "MPSDaemonReady"
	StepDaemonStopping       = "MPSDaemonStoppingRecorded"
	StepDaemonStopped        = "MPSDaemonStopped"
	StepComputeModeRestored  = "ComputeModeRestored"
	StepTimeSliceRecorded    = "TimeSliceRecorded"
	StepTimeSliceSet         = "TimeSliceSet"
	StepTimeSliceRestored    = "TimeSliceRestored"
	defaultMPSReadyTimeout   = 60 * time.Second
	mpsDirPermissions        = 0o755
	shmDirPermissionsForMPS  = 0o1777
	daemonRestartReadyBudget = 30 * time.Second
)

// SharingSteps lists every step, in the order they happen: tests crash the
// plugin at each.
var SharingSteps = []string{
	StepDaemonRecorded, StepComputeModeSet, StepDaemonLaunched, StepDaemonReady,
	StepDaemonStopping, StepDaemonStopped, StepComputeModeRestored,
	StepTimeSliceRecorded, StepTimeSliceSet, StepTimeSliceRestored,
}

// step runs the test hook after a step; its error is a crash.
func (s *State) step(claimUID, name string) error {
	if h := s.opts.Hooks.AfterSharingStep; h != nil {
		return crash(h(claimUID, name))
	}
	return nil
}

// daemonFor describes the daemon with the given ID, serving deviceUUID
// ("" when only its directories matter).
func (s *State) daemonFor(id, deviceUUID string) mps.Daemon {
	d := mps.Daemon{ID: id, Dir: filepath.Join(s.opts.MPSDir, id)}
	if deviceUUID != "" {
		d.Command = s.opts.Hardware.MPSDaemon(deviceUUID)
	}
	return d
}

// deviceUUID is what the device's daemon serves: the GPU, or its MIG
// device.
func deviceUUID(d checkpoint.Device) string {
	if d.Mig != nil {
		return d.Mig.UUID
	}
	return d.GPUUUID
}

// prepareSharing sets up device i's sharing, once its MIG device (if any)
// exists. The caller holds the claim lock.
func (s *State) prepareSharing(ctx context.Context, rec *checkpoint.Claim, i int) error {
	d := rec.Devices[i]
	if d.Sharing == nil {
		return nil
	}
	unlock := s.gpuLocks.lock(d.GPUUUID)
	defer unlock()
	switch d.Sharing.Strategy {
	case checkpoint.SharingTimeSlicing:
		if d.Mig != nil {
			return nil // MIG devices take only the default interval
		}
		return s.applyTimeSliceLocked(ctx, rec.UID, d.GPUUUID, d.Sharing.TimeSlice, false)
	case checkpoint.SharingMPS:
		return s.ensureDaemonLocked(ctx, rec.UID, d)
	}
	return fmt.Errorf("unknown sharing strategy %q", d.Sharing.Strategy)
}

// ensureDaemonLocked makes sure the device's daemon runs and answers,
// starting it (or adopting the one that runs) as recorded above. The
// caller holds the GPU lock.
func (s *State) ensureDaemonLocked(ctx context.Context, claimUID string, d checkpoint.Device) error {
	if s.opts.MPS == nil {
		return errors.New("MPS is not available: this plugin runs no MPS daemon launcher")
	}
	id, want := d.Sharing.MPSDaemon, deviceUUID(d)
	daemon := s.daemonFor(id, want)
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", id)

	s.mu.Lock()
	rec, known := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if known && rec.State == checkpoint.DaemonRunning && rec.DeviceUUID == want && mps.Ready(daemon) == nil {
		return nil // warm: another claim's daemon, or this claim's after a restart
	}
	if known && rec.DeviceUUID != want {
		// The MIG device was recreated (a reboot) with a new UUID: the
		// old daemon serves a device that no longer exists.
		logger.Info("Replacing the MPS daemon of a recreated device", "oldDevice", rec.DeviceUUID, "device", want)
		if err := s.opts.MPS.Stop(ctx, s.daemonFor(id, rec.DeviceUUID)); err != nil {
			return fmt.Errorf("stop MPS daemon %s: %w", id, err)
		}
	}
	if !known || rec.State == checkpoint.DaemonStopping {
		rec = checkpoint.MPSDaemon{ID: id, GPUUUID: d.GPUUUID, DeviceUUID: want, Dir: daemon.Dir}
		if d.Mig == nil {
			mode, err := s.opts.Hardware.ComputeMode(d.GPUUUID)
			if err != nil {
				return err
			}
			prev := int(mode)
			rec.PreviousComputeMode = &prev
		}
	}
	if rec.State != checkpoint.DaemonRunning {
		rec.State = checkpoint.DaemonStarting
	}
	rec.DeviceUUID = want
	if err := s.putDaemon(id, &rec); err != nil {
		return err
	}
	if err := s.step(claimUID, StepDaemonRecorded); err != nil {
		return err
	}

	for _, dir := range []string{daemon.PipeDir(), daemon.LogDir(), daemon.ShmDir()} {
		if err := os.MkdirAll(dir, mpsDirPermissions); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", id, err)
		}
	}
	// Clients and the server run as any user and exchange memory here.
	if err := os.Chmod(daemon.ShmDir(), shmDirPermissionsForMPS); err != nil {
		return fmt.Errorf("MPS daemon %s: %w", id, err)
	}
	if d.Mig == nil {
		// Set every time, not once: a reboot resets the compute mode
		// while the record says Running.
		if err := s.opts.Hardware.SetComputeMode(d.GPUUUID, gpu.ComputeModeExclusiveProcess); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", id, err)
		}
		if err := s.step(claimUID, StepComputeModeSet); err != nil {
			return err
		}
	}
	if err := s.opts.MPS.Start(ctx, daemon); err != nil {
		return err
	}
	if err := s.step(claimUID, StepDaemonLaunched); err != nil {
		return err
	}
	timeout := s.opts.MPSReadyTimeout
	if timeout == 0 {
		timeout = defaultMPSReadyTimeout
	}
	if err := mps.WaitReady(ctx, daemon, timeout); err != nil {
		return err
	}
	if rec.State != checkpoint.DaemonRunning {
		rec.State = checkpoint.DaemonRunning
		if err := s.putDaemon(id, &rec); err != nil {
			return err
		}
		logger.V(2).Info("Started MPS control daemon", "device", want, "dir", daemon.Dir)
	}
	return s.step(claimUID, StepDaemonReady)
}

// releaseSharing tears down what the claim's devices shared, unless other
// claims still use it: the MPS daemon is stopped and the time slice
// restored when the claim was the last to use them. The caller holds the
// claim lock.
func (s *State) releaseSharing(ctx context.Context, claimUID string) error {
	s.mu.Lock()
	c, ok := s.cp.Claims[claimUID]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	for _, d := range c.Devices {
		if d.Sharing == nil {
			continue
		}
		err := func() error {
			unlock := s.gpuLocks.lock(d.GPUUUID)
			defer unlock()
			switch d.Sharing.Strategy {
			case checkpoint.SharingMPS:
				if s.daemonRefs(d.Sharing.MPSDaemon, claimUID) > 0 {
					return nil
				}
				return s.stopDaemonLocked(ctx, claimUID, d.Sharing.MPSDaemon)
			case checkpoint.SharingTimeSlicing:
				return s.restoreTimeSliceLocked(ctx, claimUID, d.GPUUUID)
			}
			return nil
		}()
		if err != nil {
			return fmt.Errorf("device %s: release %s sharing: %w", d.Device, d.Sharing.Strategy, err)
		}
	}
	return nil
}

// daemonRefs counts the claims other than except whose records name the
// daemon.
func (s *State) daemonRefs(id, except string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for uid, c := range s.cp.Claims {
		if uid == except {
			continue
		}
		for _, d := range c.Devices {
			if d.Sharing != nil && d.Sharing.MPSDaemon == id {
				n++
				break
			}
		}
	}
	return n
}

// stopDaemonLocked stops a daemon and undoes what starting it did, as
// recorded. The caller holds the GPU lock.
func (s *State) stopDaemonLocked(ctx context.Context, claimUID, id string) error {
	s.mu.Lock()
	rec, ok := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	rec.State = checkpoint.DaemonStopping
	if err := s.putDaemon(id, &rec); err != nil {
		return err
	}
	if err := s.step(claimUID, StepDaemonStopping); err != nil {
		return err
	}
	daemon := s.daemonFor(id, "")
	if rec.Dir != "" {
		daemon.Dir = rec.Dir
	}
	if err := s.opts.MPS.Stop(ctx, daemon); err != nil {
		return err
	}
	if err := s.step(claimUID, StepDaemonStopped); err != nil {
		return err
	}
	if err := os.RemoveAll(daemon.Dir); err != nil {
		return fmt.Errorf("MPS daemon %s: remove its directories: %w", id, err)
	}
	if rec.PreviousComputeMode != nil {
		if err := s.opts.Hardware.SetComputeMode(rec.GPUUUID, gpu.ComputeMode(*rec.PreviousComputeMode)); err != nil {
			return fmt.Errorf("MPS daemon %s: restore the compute mode: %w", id, err)
		}
		if err := s.step(claimUID, StepComputeModeRestored); err != nil {
			return err
		}
	}
	if err := s.putDaemon(id, nil); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Stopped MPS control daemon", "mpsDaemon", id)
	return nil
}

// putDaemon records (or, with rec nil, forgets) a daemon and waits until
// the checkpoint holds it; a failed write takes the change back out. The
// caller holds the GPU's lock.
func (s *State) putDaemon(id string, rec *checkpoint.MPSDaemon) error {
	s.mu.Lock()
	prev, had := s.cp.MPSDaemons[id]
	set := func(d *checkpoint.MPSDaemon) {
		if d == nil {
			delete(s.cp.MPSDaemons, id)
			return
		}
		if s.cp.MPSDaemons == nil {
			s.cp.MPSDaemons = map[string]checkpoint.MPSDaemon{}
		}
		s.cp.MPSDaemons[id] = d.Clone()
	}
	set(rec)
	gen := s.changedLocked(func() {
		if had {
			set(&prev)
		} else {
			set(nil)
		}
	})
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		return fmt.Errorf("record MPS daemon %s: %w", id, err)
	}
	return nil
}

// MPSDaemonCount is how many MPS control daemons the node state runs (as
// recorded Running): the plugin's metrics report it.
func (s *State) MPSDaemonCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.cp.MPSDaemons {
		if d.State == checkpoint.DaemonRunning {
			n++
		}
	}
	return n
}

// MPSDaemons returns the daemons as recorded, by ID.
func (s *State) MPSDaemons() map[string]checkpoint.MPSDaemon {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.cp.MPSDaemons)
}

// DaemonHealth is whether a running MPS daemon answers.
type DaemonHealth struct {
	// ID is the daemon's, which is also the device it serves.
	ID      string
	GPUUUID string
	// Err says why it does not answer; nil when it does.
	Err error
}

// CheckDaemons asks every daemon recorded as Running whether it answers.
func (s *State) CheckDaemons() []DaemonHealth {
	daemons := s.MPSDaemons()
	var out []DaemonHealth
	for _, id := range slices.Sorted(maps.Keys(daemons)) {
		rec := daemons[id]
		if rec.State != checkpoint.DaemonRunning {
			continue
		}
		out = append(out, DaemonHealth{ID: id, GPUUUID: rec.GPUUUID, Err: mps.Ready(s.daemonFor(id, ""))})
	}
	return out
}

// RestartDaemon brings a daemon that stopped answering back (launching a
// new one, or waiting for the one its launcher restarts), unless it is no
// longer wanted.
func (s *State) RestartDaemon(ctx context.Context, id string) error {
	s.mu.Lock()
	rec, ok := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	unlock := s.gpuLocks.lock(rec.GPUUUID)
	defer unlock()
	s.mu.Lock()
	rec, ok = s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if !ok || rec.State != checkpoint.DaemonRunning {
		return nil
	}
	daemon := s.daemonFor(id, rec.DeviceUUID)
	if mps.Ready(daemon) == nil {
		return nil
	}
	klog.FromContext(ctx).Info("MPS control daemon stopped answering; restarting it", "mpsDaemon", id)
	if err := s.opts.MPS.Start(ctx, daemon); err != nil {
		return err
	}
	return mps.WaitReady(ctx, daemon, daemonRestartReadyBudget)
}
