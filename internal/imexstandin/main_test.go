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

package imexstandin

import (
	"bytes"
	"context"
	"errors"
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

// freeAddr is an address on 127.0.0.1 nothing listens on: the process
// under test listens there itself.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// writeFiles writes an imexd.cfg and a node list and returns the config's
// path and the control socket.
func writeFiles(t *testing.T, nodes, extra string) (string, string) {
	t.Helper()
	dir := socketDir(t)
	socket := filepath.Join(dir, "cmd.sock")
	nodeFile := filepath.Join(dir, "nodes_config.cfg")
	if nodes != "" {
		if err := os.WriteFile(nodeFile, []byte(nodes), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "imexd.cfg")
	cfg := "IMEX_NODE_CONFIG_FILE=" + nodeFile + "\nIMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH=" + socket + "\n" + extra
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgFile, socket
}

func self(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(exe, args...)
}

func TestProcessServesUntilSIGTERM(t *testing.T) {
	// The real form: an IP a line, the port in SERVER_PORT.
	host, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	cfgFile, socket := writeFiles(t, host+"\n", "BIND_INTERFACE_IP="+host+"\nSERVER_PORT="+port+"\n")
	cmd := self(t, Subcommand, "-c", cfgFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("the process exited")
		default:
		}
		ready, _ := Query(ctx, socket)
		return ready, nil
	})
	if err != nil {
		t.Fatalf("the process never answered READY: %s", stderr.String())
	}

	var out, errOut bytes.Buffer
	if code := Ctl([]string{"-q", "--u=" + socket}, &out, &errOut); code != 0 || out.String() != "READY\n" {
		t.Errorf("ctl -q: %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := Ctl([]string{"-c", cfgFile, "-N", "-j"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), `"status":"UP"`) {
		t.Errorf("ctl -N -j: %d %q %q", code, out.String(), errOut.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	out.Reset()
	errOut.Reset()
	if code := Ctl([]string{"-q", "--u=" + socket}, &out, &errOut); code == 0 {
		t.Errorf("ctl -q answered 0 with no daemon: %q", out.String())
	}
}

func TestProcessWithoutNodeList(t *testing.T) {
	cfgFile, _ := writeFiles(t, "", "")
	cmd := self(t, Subcommand, "-c", cfgFile)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitConfig || !strings.Contains(string(out), "nodes_config.cfg") {
		t.Errorf("got %v: %s; want exit %d naming the node list", err, out, ExitConfig)
	}
}

func TestCtlWithoutConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	missing := filepath.Join(socketDir(t), "imexd.cfg")
	if code := Ctl([]string{"-c", missing, "-q"}, &out, &errOut); code != ExitConfig || !strings.Contains(errOut.String(), missing) {
		t.Errorf("got %d %q; want %d naming the file", code, errOut.String(), ExitConfig)
	}
	if code := Ctl([]string{"-N"}, &out, &errOut); code != 2 {
		t.Errorf("-N without -j: %d", code)
	}
}

// process is one stand-in daemon process of a test.
type process struct {
	cmd    *exec.Cmd
	socket string
	exited chan struct{}
}

func startProcess(t *testing.T, cfgFile, socket string) *process {
	t.Helper()
	p := &process{cmd: self(t, Subcommand, "-c", cfgFile), socket: socket, exited: make(chan struct{})}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// nodeStatus waits, bounded, until the process's -N -j shows node i's
// connection to node j in state want.
func nodeStatus(t *testing.T, p *process, i, j string, want PeerState) {
	t.Helper()
	var s NodesStatus
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		s, err = QueryNodeStatus(ctx, p.socket)
		return err == nil && s.Nodes[i].Connections[j].Status == want, nil
	})
	if err != nil {
		t.Fatalf("node %s's connection to node %s never became %s: %+v", i, j, want, s)
	}
}

// waitStopped waits, bounded, until every thread of the process is
// stopped: kill(SIGSTOP) returns before the threads running on other CPUs
// have stopped, and one of them could still answer a query.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			return false, err
		}
		for _, f := range stats {
			data, err := os.ReadFile(f)
			if err != nil {
				return false, nil // a thread that just went
			}
			// pid (comm) state …: the state follows the last ')'.
			rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
			if fields := strings.Fields(rest); len(fields) == 0 || fields[0] != "T" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("process %d did not stop: %v", pid, err)
	}
}

// Two processes on 127.0.0.1, each at its own SERVER_PORT, as two trays
// would be at their own addresses: one is hung with SIGSTOP, resumed, and
// killed with SIGKILL, and the other sees each.
func TestProcessesSeeEachOtherHungAndKilled(t *testing.T) {
	addrs := []string{freeAddr(t), freeAddr(t)}
	nodes := strings.Join(addrs, "\n") + "\n"
	var ps []*process
	for _, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		cfgFile, socket := writeFiles(t, nodes, "BIND_INTERFACE_IP=127.0.0.1\nSERVER_PORT="+port+"\n")
		ps = append(ps, startProcess(t, cfgFile, socket))
	}
	nodeStatus(t, ps[0], "0", "1", PeerConnected)
	nodeStatus(t, ps[1], "1", "0", PeerConnected)

	if err := ps[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, ps[1].cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if ready, err := Query(ctx, ps[1].socket); ready || err == nil {
		t.Errorf("-q to a stopped process: %v, %v; want no answer", ready, err)
	}
	if err := ps[1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	nodeStatus(t, ps[1], "1", "0", PeerConnected)

	if err := ps[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ps[1].exited
	nodeStatus(t, ps[0], "0", "1", PeerDisconnected)
}
