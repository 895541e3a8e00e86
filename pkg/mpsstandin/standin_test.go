package mpsstandin

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// run starts the stand-in from the test binary, as the fake backend does
// from the plugin's.
func run(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, Subcommand)
	cmd.Env = append(os.Environ(), PipeDirEnv+"="+filepath.Join(dir, "pipe"), LogDirEnv+"="+filepath.Join(dir, "log"), "CUDA_VISIBLE_DEVICES=GPU-1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func dial(t *testing.T, dir string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("unix", filepath.Join(dir, "pipe", ControlSocket))
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in never listened: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ask(t *testing.T, conn net.Conn, r *bufio.Reader, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(conn, cmd); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return strings.TrimSpace(line)
}

func TestAnswersAndQuits(t *testing.T) {
	dir := t.TempDir()
	cmd := run(t, dir)
	conn := dial(t, dir)
	r := bufio.NewReader(conn)
	if got := ask(t, conn, r, "get_server_list"); got != "" {
		t.Errorf("get_server_list = %q, want no servers", got)
	}
	if got := ask(t, conn, r, "set_default_active_thread_percentage 50"); got != "50" {
		t.Errorf("set_default_active_thread_percentage = %q", got)
	}
	if got := ask(t, conn, r, "start_server"); !strings.Contains(got, "Unknown command") {
		t.Errorf("unknown command answered %q", got)
	}
	ask(t, conn, r, "quit")
	if err := cmd.Wait(); err != nil {
		t.Errorf("stand-in exited with %v after quit", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pipe", ControlSocket)); !os.IsNotExist(err) {
		t.Errorf("control socket left after quit: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log", "control.log"))
	for _, want := range []string{`started for devices "GPU-1"`, `Command "get_server_list"`, "exiting: quit"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("control.log lacks %q:\n%s", want, log)
		}
	}
}

func TestSIGTERMAndStaleSocket(t *testing.T) {
	dir := t.TempDir()
	first := run(t, dir)
	dial(t, dir).Close()
	// Killed without a chance to clean up: its socket stays behind.
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	second := run(t, dir)
	dial(t, dir).Close()
	_ = second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("stand-in exited with %v on SIGTERM", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pipe", ControlSocket)); !os.IsNotExist(err) {
		t.Errorf("control socket left after SIGTERM: %v", err)
	}
}

// TestExitsWhenItsDirectoryGoes: a stand-in whose pipe directory is
// removed exits by itself.
func TestExitsWhenItsDirectoryGoes(t *testing.T) {
	dir := t.TempDir()
	cmd := run(t, dir)
	dial(t, dir).Close()
	if err := os.RemoveAll(filepath.Join(dir, "pipe")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stand-in outlives its pipe directory")
	}
}
