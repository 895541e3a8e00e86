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
// daemon answers a control command, asked through its control client.
package mps

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/gpu"
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

// Launcher runs daemons. Implementations must be safe for concurrent use;
// the node state never starts and stops one daemon at the same time, but
// two plugins over one node (a rolling upgrade) may.
type Launcher interface {
	// Start makes sure the daemon runs: it starts it, or adopts the one
	// that already runs under its ID (after a plugin restart or during a
	// rolling upgrade). It does not wait for the daemon to be ready. The
	// node state never asks it to adopt a daemon that does not answer:
	// it kills that one first.
	Start(ctx context.Context, d Daemon) error
	// Stop stops the daemon and waits until it is gone; one that does
	// not run is not an error.
	Stop(ctx context.Context, d Daemon) error
	// Kill stops the daemon at once, with no grace period, and waits
	// until it is gone: for a daemon that no longer answers (hung,
	// wedged), which would not act on a request to stop either. One that
	// does not run is not an error.
	Kill(ctx context.Context, d Daemon) error
	// List returns the IDs of the daemons that run on the node.
	List(ctx context.Context) ([]string, error)
}

// The control command that tells whether a daemon is alive, and how long
// it has to answer. The command is the one NVIDIA's documentation and
// scripts use to check a control daemon ("echo
// get_default_active_thread_percentage | nvidia-cuda-mps-control", which
// prints e.g. "100.0"): it has a reply, and the reply comes from the
// daemon, not the client. A socket that accepts connections is no proof:
// the kernel accepts them for a stopped or wedged process too.
const (
	probeCommand = "get_default_active_thread_percentage"
	// DefaultProbeTimeout bounds one probe: a daemon that does not answer
	// within it counts as not running.
	DefaultProbeTimeout = 3 * time.Second
)

// Query runs one control command against the daemon through its control
// client and returns the reply, or an error when the client fails or ctx
// ends first (the client is killed then).
func Query(ctx context.Context, d Daemon, command string) (string, error) {
	if len(d.Command.Control) == 0 {
		return "", fmt.Errorf("MPS control daemon %s: no control client to ask it with", d.ID)
	}
	cmd := exec.CommandContext(ctx, d.Command.Control[0], d.Command.Control[1:]...)
	cmd.Env = d.Env()
	cmd.Stdin = strings.NewReader(command + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A client whose daemon hangs does not end with its context unless
	// killed; its output pipes must not hold Wait up after that either.
	cmd.WaitDelay = 100 * time.Millisecond
	err := cmd.Run()
	reply := strings.TrimSpace(out.String())
	if ctx.Err() != nil {
		return reply, fmt.Errorf("MPS control daemon %s did not answer %q: %w", d.ID, command, ctx.Err())
	}
	if err != nil {
		return reply, fmt.Errorf("MPS control daemon %s: %q: %w: %s", d.ID, command, err, reply)
	}
	return reply, nil
}

// Ready reports whether the daemon answers its control protocol within
// timeout (DefaultProbeTimeout when zero): it asks for the default active
// thread percentage and wants a number back.
func Ready(ctx context.Context, d Daemon, timeout time.Duration) error {
	// No socket, no daemon: skip starting the client.
	if _, err := os.Stat(filepath.Join(d.PipeDir(), ControlSocket)); err != nil {
		return fmt.Errorf("MPS control daemon %s does not answer: %w", d.ID, err)
	}
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, err := Query(ctx, d, probeCommand)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseFloat(reply, 64); err != nil {
		return fmt.Errorf("MPS control daemon %s answered %q with %q, not a percentage", d.ID, probeCommand, reply)
	}
	return nil
}

// WaitReady probes the daemon until it answers, ctx ends or timeout
// passes.
func WaitReady(ctx context.Context, d Daemon, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A daemon answers within milliseconds of its start, or takes a
	// while: ask often at first, then every 200 ms.
	backoff := wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Cap: 200 * time.Millisecond, Steps: math.MaxInt32}
	var err error
	if backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err = Ready(ctx, d, 0)
		return err == nil, nil
	}) == nil {
		return nil
	}
	return fmt.Errorf("%w (waited %v)", err, timeout)
}
