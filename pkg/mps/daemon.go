// Package mps runs CUDA MPS control daemons for the node state: one per
// shared device, each with its own directories, started by a Launcher and
// checked through its control socket.
//
// The node state decides when a daemon runs (the first claim that asks for
// MPS on a device starts it, the last one to go stops it, both recorded in
// the checkpoint); this package only knows how. Two launchers run the same
// daemon command: ProcessLauncher (a detached process on this machine, for
// the in-process tests and gpudra simulate) and the plugin's pod launcher
// (a pod per daemon on the plugin's node, which outlives a plugin restart
// and a rolling upgrade on a cluster). Readiness is the same for both: the
// daemon answers on <pipe directory>/control.
package mps

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// Directory and environment names, as MPS defines them.
const (
	PipeDirEnv = "CUDA_MPS_PIPE_DIRECTORY"
	LogDirEnv  = "CUDA_MPS_LOG_DIRECTORY"
	// ControlSocket is the control daemon's socket in the pipe directory.
	ControlSocket = "control"
	// DaemonIDEnv names, in a daemon's environment, the daemon it is. A
	// process that has it never starts daemons itself (ProcessLauncher
	// refuses), so that a binary that somehow runs itself as a daemon
	// cannot multiply.
	DaemonIDEnv = "GPUDRA_MPS_DAEMON_ID"
)

// Daemon is one MPS control daemon.
type Daemon struct {
	// ID names the daemon on the node: the name of the device it serves
	// (gpu-0, gpu-0-mig-1g10gb-3), a DNS label.
	ID string
	// Dir holds the daemon's pipe/, log/ and shm/ directories. It must be
	// the same path inside and outside the plugin's container.
	Dir string
	// Command runs the daemon in the foreground.
	Command gpu.DaemonCommand
}

// PipeDir holds the control socket and the server's pipes; every client
// mounts it.
func (d Daemon) PipeDir() string { return filepath.Join(d.Dir, "pipe") }

// LogDir holds control.log and server.log.
func (d Daemon) LogDir() string { return filepath.Join(d.Dir, "log") }

// ShmDir is the daemon's and its clients' /dev/shm: MPS passes memory
// between them through it.
func (d Daemon) ShmDir() string { return filepath.Join(d.Dir, "shm") }

// Env is the daemon's whole environment: its command's, the pipe and log
// directories, and its own ID.
func (d Daemon) Env() []string {
	return append(slices.Clone(d.Command.Env), PipeDirEnv+"="+d.PipeDir(), LogDirEnv+"="+d.LogDir(), DaemonIDEnv+"="+d.ID)
}

// Launcher runs daemons. Implementations must be safe for concurrent use
// for different daemons; the node state never starts and stops one daemon
// at the same time.
type Launcher interface {
	// Start makes sure the daemon runs: it starts it, or adopts the one
	// that already runs under its ID (after a plugin restart or during a
	// rolling upgrade). It does not wait for the daemon to be ready.
	Start(ctx context.Context, d Daemon) error
	// Stop stops the daemon and waits until it is gone; one that does
	// not run is not an error.
	Stop(ctx context.Context, d Daemon) error
	// List returns the IDs of the daemons that run on the node.
	List(ctx context.Context) ([]string, error)
}

// Ready reports whether the daemon accepts connections on its control
// socket, which is what a client's CUDA driver connects to.
func Ready(d Daemon) error {
	conn, err := net.DialTimeout("unix", filepath.Join(d.PipeDir(), ControlSocket), time.Second)
	if err != nil {
		return fmt.Errorf("MPS control daemon %s does not answer: %w", d.ID, err)
	}
	return conn.Close()
}

// WaitReady polls Ready until it succeeds, ctx ends or timeout passes.
func WaitReady(ctx context.Context, d Daemon, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		err := Ready(d)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waited %v)", err, timeout)
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
