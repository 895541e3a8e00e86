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

package mps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ProcessLauncher runs each daemon as a process on this machine, in a
// session of its own, so that it outlives the plugin that started it: a
// plugin restarted in the same process, or another process over the same
// directories, adopts it through its PID file. It is what the in-process
// tests and gpudra simulate use; on a cluster the plugin's container would
// take such processes down with it, so the plugin runs daemons as pods.
type ProcessLauncher struct {
	// Root is the directory that holds every daemon's Dir.
	Root string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL;
	// zero means 5 seconds.
	StopTimeout time.Duration
}

var _ Launcher = (*ProcessLauncher)(nil)

// Each daemon's PID file, <Root>/<ID>.pid, says which process runs it:
// "<pid> <start time>", the start time (in clock ticks since boot, from
// /proc/<pid>/stat) telling the daemon from a later process that reuses
// its PID. It lies beside the daemon's directory, not in it, so that a
// daemon whose directory was deleted under it (a cleanup script) is still
// found, and stopped, rather than left running beside its replacement.
// <Root>/<ID>.lock serializes Start, Stop and Kill of one daemon, across
// processes too (two plugins during a rolling upgrade): without it two
// Starts could both find no daemon and start two.
const (
	pidSuffix  = ".pid"
	lockSuffix = ".lock"
)

func (l *ProcessLauncher) pidPath(id string) string { return filepath.Join(l.Root, id+pidSuffix) }

// lock takes the daemon's lock and returns the function that releases it.
func (l *ProcessLauncher) lock(id string) (unlock func(), err error) {
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		return nil, fmt.Errorf("MPS daemon %s: %w", id, err)
	}
	f, err := os.OpenFile(filepath.Join(l.Root, id+lockSuffix), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("MPS daemon %s: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("MPS daemon %s: lock: %w", id, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// Start starts the daemon unless its PID file names a live process. A
// process that is itself a daemon starts none.
func (l *ProcessLauncher) Start(_ context.Context, d Daemon) error {
	if self := os.Getenv(DaemonIDEnv); self != "" {
		return fmt.Errorf("MPS daemon %s: this process is MPS daemon %s, and a daemon never starts daemons", d.ID, self)
	}
	unlock, err := l.lock(d.ID)
	if err != nil {
		return err
	}
	defer unlock()
	if _, alive := readPID(l.pidPath(d.ID)); alive {
		return nil
	}
	if err := os.MkdirAll(d.LogDir(), 0o755); err != nil {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	out, err := os.OpenFile(filepath.Join(d.LogDir(), "daemon.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	defer out.Close()
	if len(d.Command.Args) == 0 {
		return fmt.Errorf("MPS daemon %s: no command", d.ID)
	}
	cmd := exec.Command(d.Command.Args[0], d.Command.Args[1:]...)
	cmd.Env = d.Env()
	cmd.Dir = d.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("MPS daemon %s: start %s: %w", d.ID, d.Command.Args[0], err)
	}
	// Reap it whenever it ends, so that a dead daemon is not left a
	// zombie that still looks alive.
	go func() { _ = cmd.Wait() }()
	start, err := startTime(cmd.Process.Pid)
	if err == nil {
		err = writeFileAtomic(l.pidPath(d.ID), fmt.Sprintf("%d %d\n", cmd.Process.Pid, start))
	}
	if err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("MPS daemon %s: record its PID: %w", d.ID, err)
	}
	return nil
}

// Stop sends SIGTERM, then SIGKILL after StopTimeout, and waits for the
// process to be gone. SIGCONT follows SIGTERM, as systemd does, so that a
// stopped process gets to act on it.
func (l *ProcessLauncher) Stop(ctx context.Context, d Daemon) error {
	timeout := l.StopTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	return l.stop(ctx, d, timeout)
}

// Kill sends SIGKILL at once and waits for the process to be gone.
func (l *ProcessLauncher) Kill(ctx context.Context, d Daemon) error {
	return l.stop(ctx, d, 0)
}

func (l *ProcessLauncher) stop(ctx context.Context, d Daemon, grace time.Duration) error {
	unlock, err := l.lock(d.ID)
	if err != nil {
		return err
	}
	defer unlock()
	path := l.pidPath(d.ID)
	pid, alive := readPID(path)
	if alive {
		gone := false
		if grace > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			gone = waitGone(ctx, path, grace)
		}
		if !gone {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if !waitGone(ctx, path, 5*time.Second) {
				return fmt.Errorf("MPS daemon %s (pid %d) does not go away", d.ID, pid)
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	return nil
}

// List returns the daemons under Root whose process is alive.
func (l *ProcessLauncher) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(l.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), pidSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if _, alive := readPID(filepath.Join(l.Root, e.Name())); alive {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// PID returns the daemon's process ID while it runs (0 otherwise): tests
// kill it from outside.
func (l *ProcessLauncher) PID(d Daemon) int {
	if pid, alive := readPID(l.pidPath(d.ID)); alive {
		return pid
	}
	return 0
}

// waitGone reports whether the process of a PID file is gone within
// timeout (false when ctx ends first).
func waitGone(ctx context.Context, pidPath string, timeout time.Duration) bool {
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, alive := readPID(pidPath)
		return !alive, nil
	}) == nil
}

// readPID returns the PID in a PID file and whether that process is the
// one that wrote it and is still running (not a zombie).
func readPID(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil || pid <= 0 {
		return 0, false
	}
	st, err := procStat(pid)
	if err != nil || st.state == "Z" || st.state == "X" || st.start != start {
		return pid, false
	}
	return pid, true
}

type stat struct {
	state string
	start uint64
}

// procStat reads a process's state and start time from /proc/<pid>/stat.
// The command name in parentheses may hold spaces, so fields are counted
// after its closing parenthesis: state is field 3, starttime field 22.
func procStat(pid int) (stat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, err
	}
	return stat{state: f[0], start: start}, nil
}

func startTime(pid int) (uint64, error) {
	st, err := procStat(pid)
	return st.start, err
}

func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
