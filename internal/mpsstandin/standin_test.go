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

package mpsstandin

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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
	var conn net.Conn
	var err error
	if wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		conn, err = net.Dial("unix", filepath.Join(dir, "pipe", ControlSocket))
		return err == nil, nil
	}) != nil {
		t.Fatalf("the stand-in never listened: %v", err)
	}
	return conn
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

// TestOutlivesItsDirectoryLikeTheRealDaemon: a stand-in whose directory
// is deleted under it keeps running, as nvidia-cuda-mps-control does (the
// plugin must notice and replace it), but exits once the directory that
// holds every daemon's is gone too (a test's temporary directory).
func TestOutlivesItsDirectoryLikeTheRealDaemon(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "gpu-0")
	cmd := run(t, dir)
	dial(t, dir).Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the stand-in exited when its own directory went (%v); the real daemon runs on", err)
	case <-time.After(2500 * time.Millisecond):
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stand-in outlives the directory of all daemons")
	}
}

// control runs the stand-in's control client with the commands on its
// stdin, as the plugin runs nvidia-cuda-mps-control, and returns what it
// printed and its exit status.
func control(t *testing.T, dir string, timeout time.Duration, commands ...string) (string, int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, ControlSubcommand)
	cmd.Env = append(os.Environ(), PipeDirEnv+"="+filepath.Join(dir, "pipe"))
	cmd.Stdin = strings.NewReader(strings.Join(commands, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), -1
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestControlClient: the client answers like nvidia-cuda-mps-control: the
// default active thread percentage ("100.0", or the daemon's environment's,
// or what was set), nothing for an empty server list, "Cannot find MPS
// control daemon process" without a daemon; and it gets no answer at all
// from a stopped one.
func TestControlClient(t *testing.T) {
	dir := t.TempDir()
	if out, code := control(t, dir, 10*time.Second, "get_default_active_thread_percentage"); code != 1 || !strings.Contains(out, "Cannot find MPS control daemon process") {
		t.Errorf("without a daemon: %q, exit %d", out, code)
	}
	cmd := run(t, dir)
	dial(t, dir).Close()
	if out, code := control(t, dir, 10*time.Second, "get_default_active_thread_percentage"); code != 0 || out != "100.0\n" {
		t.Errorf("get_default_active_thread_percentage: %q, exit %d", out, code)
	}
	if out, code := control(t, dir, 10*time.Second, "set_default_active_thread_percentage 25", "get_server_list", "get_default_active_thread_percentage"); code != 0 || out != "25\n25.0\n" {
		t.Errorf("set, list, get: %q, exit %d", out, code)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGCONT) }()
	if out, code := control(t, dir, time.Second, "get_default_active_thread_percentage"); code != -1 {
		t.Errorf("a stopped daemon answered %q (exit %d)", out, code)
	}
}
