package mps

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/mpsstandin"
)

func standIn(t *testing.T, root, id string) Daemon {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Daemon{ID: id, Dir: filepath.Join(root, id), Command: gpu.DaemonCommand{
		Args: []string{self, mpsstandin.Subcommand},
		Env:  []string{"CUDA_VISIBLE_DEVICES=GPU-" + id},
	}}
}

func TestProcessLauncherLifecycle(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	l := &ProcessLauncher{Root: root}
	d := standIn(t, root, "gpu-0")
	t.Cleanup(func() { _ = l.Stop(ctx, d) })

	if err := Ready(d); err == nil {
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
	deadline := time.Now().Add(10 * time.Second)
	for l.PID(d) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a killed daemon still counts as running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The thread group leader turns zombie before the other threads
	// have closed the socket: not ready within moments.
	for Ready(d) == nil {
		if time.Now().After(deadline) {
			t.Fatal("a killed daemon is still ready")
		}
		time.Sleep(10 * time.Millisecond)
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
	dir := filepath.Join(root, "gpu-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Our own PID, with a start time that is not ours: a reused PID.
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte("1 12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, alive := readPID(dir); alive {
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
