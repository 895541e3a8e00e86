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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/mpsstandin"
)

func standIn(t *testing.T, root, id string) Daemon {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Daemon{ID: id, Dir: filepath.Join(root, id), Command: gpu.DaemonCommand{
		Args:    []string{self, mpsstandin.Subcommand},
		Env:     []string{"CUDA_VISIBLE_DEVICES=GPU-" + id},
		Control: []string{self, mpsstandin.ControlSubcommand},
	}}
}

func TestProcessLauncherLifecycle(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	l := &ProcessLauncher{Root: root}
	d := standIn(t, root, "gpu-0")
	t.Cleanup(func() { _ = l.Stop(ctx, d) })

	if err := Ready(ctx, d, 0); err == nil {
		t.Fatal("ready before it was started")
	}
	if err := l.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(ctx, d, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pid := l.PID(d)

	// Another launcher over the same directories (a restarted plugin)
	// adopts the daemon instead of starting a second one.
	again := &ProcessLauncher{Root: root}
	if err := again.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := again.PID(d); got != pid {
		t.Errorf("restarted launcher runs pid %d, want the adopted %d", got, pid)
	}
	if ids, err := again.List(ctx); err != nil || !slices.Equal(ids, []string{"gpu-0"}) {
		t.Errorf("List = %v, %v", ids, err)
	}

	// Killed from outside: no longer ready, no longer listed, and Start
	// brings up a new one.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// One 10 s bound for both.
	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(within, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return l.PID(d) == 0, nil
	}); err != nil {
		t.Fatal("a killed daemon still counts as running")
	}
	// The thread group leader turns zombie before the other threads
	// have closed the socket: not ready within moments.
	if err := wait.PollUntilContextCancel(within, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return Ready(ctx, d, 0) != nil, nil
	}); err != nil {
		t.Fatal("a killed daemon is still ready")
	}
	if err := l.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(ctx, d, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if l.PID(d) == pid || l.PID(d) == 0 {
		t.Errorf("restarted daemon has pid %d (old %d)", l.PID(d), pid)
	}

	if err := l.Stop(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ids, _ := l.List(ctx); len(ids) != 0 {
		t.Errorf("daemons left after Stop: %v", ids)
	}
	if err := l.Stop(ctx, d); err != nil {
		t.Errorf("stopping a stopped daemon: %v", err)
	}
}

func TestStalePIDFileIsNotAlive(t *testing.T) {
	root := t.TempDir()
	pidPath := filepath.Join(root, "gpu-1"+pidSuffix)
	// PID 1, with a start time that is not its own: a reused PID.
	if err := os.WriteFile(pidPath, []byte("1 12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, alive := readPID(pidPath); alive {
		t.Error("a PID whose start time differs counts as the daemon")
	}
	l := &ProcessLauncher{Root: root}
	if ids, _ := l.List(context.Background()); len(ids) != 0 {
		t.Errorf("List = %v, want none", ids)
	}
}

// TestDaemonStartsNoDaemon: a process running as a daemon refuses to start
// one, so that a binary that runs itself as a daemon cannot multiply.
func TestDaemonStartsNoDaemon(t *testing.T) {
	t.Setenv(DaemonIDEnv, "gpu-7")
	root := t.TempDir()
	l := &ProcessLauncher{Root: root}
	err := l.Start(context.Background(), standIn(t, root, "gpu-0"))
	if err == nil || !strings.Contains(err.Error(), "this process is MPS daemon gpu-7") {
		t.Errorf("Start inside a daemon = %v", err)
	}
	if ids, _ := l.List(context.Background()); len(ids) != 0 {
		t.Errorf("daemons %v started", ids)
	}
}

// TestConcurrentStartsStartOne: many Starts of one daemon at once, from
// launchers of two plugins over the same directories, start one process,
// and one Stop leaves none.
func TestConcurrentStartsStartOne(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := standIn(t, root, "gpu-0")
	launchers := []*ProcessLauncher{{Root: root}, {Root: root}}
	t.Cleanup(func() { _ = launchers[0].Kill(ctx, d) })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := launchers[i%2].Start(ctx, d); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := WaitReady(ctx, d, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(standInProcesses(t, d)); n != 1 {
		t.Fatalf("%d stand-in processes for one daemon, want 1", n)
	}
	if err := launchers[1].Stop(ctx, d); err != nil {
		t.Fatal(err)
	}
	if left := standInProcesses(t, d); len(left) != 0 {
		t.Errorf("processes %v left after Stop", left)
	}
}

// standInProcesses finds the live processes that run the daemon, by the
// daemon ID in their environment, whatever the PID file says.
func standInProcesses(t *testing.T, d Daemon) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), PipeDirEnv+"="+d.PipeDir()) {
			continue
		}
		if st, err := procStat(pid); err == nil && st.state != "Z" && st.state != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// TestHungDaemonIsNotReady: a stopped daemon's socket accepts
// connections, but it answers nothing: Ready says so within its timeout,
// and Kill ends it at once.
func TestHungDaemonIsNotReady(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	l := &ProcessLauncher{Root: root}
	d := standIn(t, root, "gpu-0")
	t.Cleanup(func() { _ = l.Kill(ctx, d) })
	if err := l.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(ctx, d, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pid := l.PID(d)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := Ready(ctx, d, 500*time.Millisecond)
	if err == nil {
		t.Fatal("a stopped daemon is ready")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Ready took %v to give up, with a timeout of 500ms", took)
	}
	start = time.Now()
	if err := l.Kill(ctx, d); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Kill of a stopped daemon took %v", took)
	}
	if l.PID(d) != 0 {
		t.Error("the killed daemon still runs")
	}
}
