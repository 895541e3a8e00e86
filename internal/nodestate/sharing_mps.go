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
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/mps"
)

// MPS: one control daemon per shared device (a whole GPU or a MIG device),
// named after the device. The claims whose records name the daemon are
// its references: the first one to be prepared starts it, the last one to
// go stops it. Every step is recorded in the checkpoint before it is
// taken, so that a plugin that dies half-way finishes or undoes it at its
// next start, and never leaks a daemon, its directories or a changed
// compute mode:
//
//	start: remember the GPU's compute mode → record Starting → create the
//	       directories and set exclusive-process → kill a predecessor that
//	       does not answer → launch → ready: Running
//	stop:  record Stopping → stop the daemon → remove the directories →
//	       restore the compute mode and forget it → forget the daemon
//
// A whole GPU is set to exclusive-process compute mode while its daemon
// runs, so that every client goes through MPS; a GPU in MIG mode keeps the
// default compute mode (NVML refuses any other), and its MIG devices' daemons
// share it. The mode to restore is remembered per GPU
// (Checkpoint.ComputeModes), before gpudra first changes it, and forgotten
// only once it is restored: whatever becomes of a daemon's record (a stop
// that failed half-way, a new daemon started before the kubelet retried,
// a hand-edited checkpoint), gpudra never takes its own exclusive-process
// for the mode to go back to.
//
// A daemon is alive when it answers its control protocol: a command with a
// reply, within a deadline (mps.Ready). One that does not (stopped, hung,
// its socket or directory gone) is never joined nor adopted: it is killed
// and replaced, by the prepare that finds it, at start-up, or by the
// plugin's periodic check, within seconds. A co-tenant's unprepare does
// not wait on a daemon at all.

// Steps of starting and stopping a daemon, for Hooks.AfterSharingStep.
const (
	StepDaemonRecorded      = "MPSDaemonRecorded"
	StepComputeModeSet      = "ComputeModeSet"
	StepDaemonLaunched      = "MPSDaemonLaunched"
	StepDaemonReady         = "MPSDaemonReady"
	StepDaemonStopping      = "MPSDaemonStoppingRecorded"
	StepDaemonStopped       = "MPSDaemonStopped"
	StepComputeModeRestored = "ComputeModeRestored"
)

const (
	defaultMPSReadyTimeout  = 60 * time.Second
	restartReadyBudget      = 10 * time.Second
	mpsDirPermissions       = 0o755
	shmDirPermissionsForMPS = 0o1777
)

// mpsStrategy is the MPS sharing strategy: it runs the device's MPS
// control daemon, and on a whole GPU sets exclusive-process compute mode
// while the daemon runs (sharing_computemode.go). Its state is the
// checkpoint's MPSDaemons and ComputeModes.
type mpsStrategy struct{}

func (mpsStrategy) name() string { return checkpoint.SharingMPS }

// prepareLocked makes sure the device's daemon runs and answers. The
// caller holds the GPU lock.
func (m mpsStrategy) prepareLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	return m.ensureDaemonLocked(ctx, s, claimUID, d)
}

// keptByOthers reports whether another claim references the device's
// daemon. It is asked without waiting for the GPU lock, which a prepare
// replacing a hung daemon may hold: a co-tenant's unprepare must not wait
// on a daemon. Claims only ever join a daemon under that lock, so a count
// above zero stays so until this claim is forgotten.
func (m mpsStrategy) keptByOthers(s *State, claimUID string, d checkpoint.Device) bool {
	return m.daemonRefs(s, d.Sharing.MPSDaemon, claimUID) > 0
}

// releaseLocked stops the device's daemon once no other claim references
// it. The caller holds the GPU lock.
func (m mpsStrategy) releaseLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	if m.daemonRefs(s, d.Sharing.MPSDaemon, claimUID) > 0 {
		return nil
	}
	return m.stopDaemonLocked(ctx, s, claimUID, d.Sharing.MPSDaemon, d.GPUUUID)
}

// daemonFor describes the daemon with the given ID, serving deviceUUID
// ("" when only its directories matter). Its directory is always
// <MPSDir>/<ID>, whatever a record says: an ID that is not a device name
// (a hand-edited or corrupted checkpoint, "../x") names no daemon of
// gpudra's, and nothing outside the MPS directory is ever created or
// removed for it.
func (m mpsStrategy) daemonFor(s *State, id, deviceUUID string) (mps.Daemon, error) {
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return mps.Daemon{}, fmt.Errorf("MPS daemon %q: not a device name (%s): the checkpoint was edited or is corrupt; gpudra touches nothing outside its MPS directory %s for it", id, errs[0], s.opts.MPSDir)
	}
	d := mps.Daemon{ID: id, Dir: filepath.Join(s.opts.MPSDir, id)}
	if deviceUUID != "" {
		d.Command = s.opts.Hardware.MPSDaemon(deviceUUID)
	}
	return d, nil
}

// probe asks the daemon whether it is alive, within the probe timeout.
func (m mpsStrategy) probe(ctx context.Context, s *State, d mps.Daemon) error {
	if d.Command.Control == nil {
		// Only its directories were asked for: ask with any device's
		// client (the client is the same for every device).
		d.Command = s.opts.Hardware.MPSDaemon("")
	}
	return mps.Ready(ctx, d, s.opts.MPSProbeTimeout)
}

// deviceUUID is what the device's daemon serves: the GPU, or its MIG
// device.
func deviceUUID(d checkpoint.Device) string {
	if d.Mig != nil {
		return d.Mig.UUID
	}
	return d.GPUUUID
}

// ensureDaemonLocked makes sure the device's daemon runs and answers,
// starting it (or adopting the one that runs and answers) as recorded
// above. The caller holds the GPU lock.
func (m mpsStrategy) ensureDaemonLocked(ctx context.Context, s *State, claimUID string, d checkpoint.Device) error {
	if s.opts.MPS == nil {
		return errors.New("MPS is not available: this plugin runs no MPS daemon launcher")
	}
	id, want := d.Sharing.MPSDaemon, deviceUUID(d)
	daemon, err := m.daemonFor(s, id, want)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", id)

	s.mu.Lock()
	rec, known := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	current := known && rec.State == checkpoint.DaemonRunning && rec.DeviceUUID == want && rec.GPUUUID == d.GPUUUID
	if current {
		err := m.probe(ctx, s, daemon)
		if err == nil {
			return nil // warm: another claim's daemon, or this claim's after a restart
		}
		if ctx.Err() != nil {
			return err // cut short: it says nothing of the daemon
		}
		logger.Info("MPS control daemon does not answer; replacing it", "err", err)
	}
	// Never adopt a daemon that does not answer, nor one that serves a
	// device that was recreated (a reboot gave a MIG device a new UUID).
	replace := current || (known && rec.DeviceUUID != want)
	if rec, err = m.recordStarting(ctx, s, claimUID, d, daemon, rec, known); err != nil {
		return err
	}
	if err := m.launch(ctx, s, claimUID, d, daemon, replace); err != nil {
		return err
	}
	if rec.State != checkpoint.DaemonRunning {
		rec.State = checkpoint.DaemonRunning
		if err := m.putDaemon(s, id, &rec); err != nil {
			return err
		}
		logger.V(2).Info("Started MPS control daemon", "device", want, "dir", daemon.Dir)
	}
	return s.step(claimUID, StepDaemonReady)
}

// recordStarting records the daemon before anything is done for it: as
// Starting, or still Running when a running daemon is being replaced;
// for a whole GPU, the compute mode to restore is remembered first. rec
// and known are the daemon's record as it was; the new record is
// returned. The caller holds the GPU lock.
func (m mpsStrategy) recordStarting(ctx context.Context, s *State, claimUID string, d checkpoint.Device, daemon mps.Daemon, rec checkpoint.MPSDaemon, known bool) (checkpoint.MPSDaemon, error) {
	var prevMode *int
	if d.Mig == nil {
		mode, err := m.rememberComputeModeLocked(ctx, s, d.GPUUUID)
		if err != nil {
			return rec, fmt.Errorf("MPS daemon %s: %w", daemon.ID, err)
		}
		prevMode = &mode
	}
	if !known || rec.State == checkpoint.DaemonStopping {
		rec = checkpoint.MPSDaemon{ID: daemon.ID}
	}
	rec.GPUUUID, rec.DeviceUUID, rec.Dir, rec.PreviousComputeMode = d.GPUUUID, deviceUUID(d), daemon.Dir, prevMode
	if rec.State != checkpoint.DaemonRunning {
		rec.State = checkpoint.DaemonStarting
	}
	if err := m.putDaemon(s, daemon.ID, &rec); err != nil {
		return rec, err
	}
	return rec, s.step(claimUID, StepDaemonRecorded)
}

// launch makes the daemon's directories, sets a whole GPU to
// exclusive-process, kills the daemon that runs when it is to be replaced
// or does not answer, starts a new one and waits until it answers. The
// caller holds the GPU lock.
func (m mpsStrategy) launch(ctx context.Context, s *State, claimUID string, d checkpoint.Device, daemon mps.Daemon, replace bool) error {
	if err := makeDaemonDirs(daemon); err != nil {
		return err
	}
	if d.Mig == nil {
		// Set every time, not once: a reboot resets the compute mode
		// while the record says Running.
		if err := s.opts.Hardware.SetComputeMode(d.GPUUUID, gpu.ComputeModeExclusiveProcess); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", daemon.ID, err)
		}
		if err := s.step(claimUID, StepComputeModeSet); err != nil {
			return err
		}
	}
	if replace || m.probe(ctx, s, daemon) != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.opts.MPS.Kill(ctx, daemon); err != nil {
			return fmt.Errorf("MPS daemon %s: kill the one that does not answer: %w", daemon.ID, err)
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
	return mps.WaitReady(ctx, daemon, timeout)
}

// makeDaemonDirs creates the daemon's directories, which may have been
// deleted under it.
func makeDaemonDirs(d mps.Daemon) error {
	for _, dir := range []string{d.PipeDir(), d.LogDir(), d.ShmDir()} {
		if err := os.MkdirAll(dir, mpsDirPermissions); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
		}
	}
	// Clients and the server run as any user and exchange memory here.
	if err := os.Chmod(d.ShmDir(), shmDirPermissionsForMPS); err != nil {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	return nil
}

// daemonRefs counts the claims other than except whose records name the
// daemon. A claim being unprepared holds no reference: its containers are
// gone, and two claims unprepared at once must not each keep the daemon
// for the other.
func (m mpsStrategy) daemonRefs(s *State, id, except string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for uid, c := range s.cp.Claims {
		if uid == except || c.State == checkpoint.UnprepareStarted {
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
// recorded; gpuUUID is the GPU it runs on, whose lock the caller holds.
// A daemon without a record (a hand-edited checkpoint) is stopped too: a
// claim named it. Its GPU's compute mode is restored once the daemon of
// the whole GPU is gone.
func (m mpsStrategy) stopDaemonLocked(ctx context.Context, s *State, claimUID, id, gpuUUID string) error {
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", id)
	daemon, err := m.daemonFor(s, id, "")
	s.mu.Lock()
	rec, known := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if err != nil {
		// Nothing of gpudra's can be under that name: forget it.
		logger.Error(err, "Forgetting an MPS daemon record that names no device")
		if known {
			return m.putDaemon(s, id, nil)
		}
		return nil
	}
	if known {
		rec.State = checkpoint.DaemonStopping
		if err := m.putDaemon(s, id, &rec); err != nil {
			return err
		}
		if err := s.step(claimUID, StepDaemonStopping); err != nil {
			return err
		}
	}
	if s.opts.MPS != nil {
		if err := s.opts.MPS.Stop(ctx, daemon); err != nil {
			return err
		}
	}
	if err := s.step(claimUID, StepDaemonStopped); err != nil {
		return err
	}
	if err := os.RemoveAll(daemon.Dir); err != nil {
		return fmt.Errorf("MPS daemon %s: remove its directories: %w", id, err)
	}
	if p, ok := gpu.ParseDeviceName(id); ok && !p.MIG && !p.Monitor {
		if err := m.restoreComputeModeLocked(ctx, s, claimUID, gpuUUID); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", id, err)
		}
	}
	if known {
		if err := m.putDaemon(s, id, nil); err != nil {
			return err
		}
	}
	logger.V(2).Info("Stopped MPS control daemon")
	return nil
}

// putDaemon records (or, with rec nil, forgets) a daemon and waits until
// the checkpoint holds it; a failed write takes the change back out. The
// caller holds the GPU's lock.
func (m mpsStrategy) putDaemon(s *State, id string, rec *checkpoint.MPSDaemon) error {
	if rec != nil {
		c := rec.Clone()
		rec = &c
	}
	s.mu.Lock()
	gen := putEntryLocked(s, &s.cp.MPSDaemons, id, rec)
	s.mu.Unlock()
	if err := s.commit(gen); err != nil {
		return fmt.Errorf("record MPS daemon %s: %w", id, err)
	}
	return nil
}
