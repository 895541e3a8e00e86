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

// Package mpsstandin is the fake backend's MPS control daemon: a real
// process that does, for the plugin, what nvidia-cuda-mps-control -f does
// on a GPU node. It reads the same environment (CUDA_MPS_PIPE_DIRECTORY,
// CUDA_MPS_LOG_DIRECTORY, CUDA_VISIBLE_DEVICES,
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), creates the pipe and log
// directories, writes control.log, and listens on the control socket
// <pipe directory>/control until it is told to quit or gets SIGTERM. Its
// control client (ControlSubcommand) is what nvidia-cuda-mps-control
// without -f is: it sends the commands on its stdin to the daemon and
// prints the replies, and says "Cannot find MPS control daemon process"
// when there is none.
//
// It runs nothing on a GPU; what it makes testable for real is the
// daemon's lifecycle: one process per shared device, started, adopted
// after a plugin restart, restarted when it dies or hangs (a test stops
// it with SIGSTOP: its socket still accepts connections, as the kernel
// accepts them for any stopped process, but nothing answers), and
// stopped. Like the real daemon, it keeps running when its directory is
// deleted under it.
//
// It lives, as a subcommand, in every binary that links it (the fake
// backend does): the kubelet plugin, gpudra and test binaries. The
// package's init runs it when the process was started as one, before main
// or a test binary's flag parsing, so that no binary can forget to: one
// that did would run itself in full as the "daemon", and a test binary
// would run its tests again, recursively.
package mpsstandin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Subcommand is the first argument that makes a binary the stand-in;
// ControlSubcommand makes it the stand-in's control client.
const (
	Subcommand        = "fake-mps-control-daemon"
	ControlSubcommand = "fake-mps-control"
)

// Environment variables the stand-in reads, as nvidia-cuda-mps-control
// does, and their defaults (the MPS documentation's).
const (
	PipeDirEnv     = "CUDA_MPS_PIPE_DIRECTORY"
	LogDirEnv      = "CUDA_MPS_LOG_DIRECTORY"
	threadsEnv     = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	defaultPipeDir = "/tmp/nvidia-mps"
	defaultLogDir  = "/var/log/nvidia-mps"
)

// ControlSocket is the name of the control daemon's socket in the pipe
// directory.
const ControlSocket = "control"

// init runs the stand-in, or its control client, and exits if the
// process was started as one (its first argument is Subcommand or
// ControlSubcommand).
func init() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case Subcommand:
			os.Exit(Main())
		case ControlSubcommand:
			os.Exit(Control(os.Stdin, os.Stdout, os.Stderr))
		}
	}
}

// Main runs the stand-in until it is told to quit or signalled, and
// returns the exit status.
func Main() int {
	pipeDir := envOr(PipeDirEnv, defaultPipeDir)
	logDir := envOr(LogDirEnv, defaultLogDir)
	d, err := start(pipeDir, logDir, os.Getenv("CUDA_VISIBLE_DEVICES"), os.Getenv(threadsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake MPS control daemon:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		d.stop("signal " + s.String())
	}()
	go d.watchLifeline(filepath.Dir(filepath.Dir(pipeDir)), time.Second)
	d.serve()
	return 0
}

// watchLifeline stops the daemon once the directory that holds every
// daemon's directory (the parent of its own) is gone: the plugin's data
// went away with the temporary directory of a test, and nothing could
// ever reach or stop this process again. It is the stand-in's one
// departure from the real daemon, which would run on; its own directory
// going is not enough (the real daemon survives that, and so must the
// plugin's handling of it).
func (d *daemon) watchLifeline(dir string, every time.Duration) {
	_ = wait.PollUntilContextCancel(wait.ContextForChannel(d.stopped), every, false, func(context.Context) (bool, error) {
		if _, err := os.Stat(dir); err != nil {
			d.stop("the MPS directory is gone: " + err.Error())
			return true, nil
		}
		return false, nil
	})
}

type daemon struct {
	ln      net.Listener
	log     *os.File
	logMu   sync.Mutex
	once    sync.Once
	stopped chan struct{}
	socket  string

	mu sync.Mutex
	// threads is the default active thread percentage, as the daemon
	// reports it ("100.0" unless set).
	threads string
}

func start(pipeDir, logDir, devices, threads string) (*daemon, error) {
	for _, dir := range []string{pipeDir, logDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	logFile, err := os.OpenFile(filepath.Join(logDir, "control.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(pipeDir, ControlSocket)
	// A socket left by a daemon that was killed: nobody listens on it.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	d := &daemon{ln: ln, log: logFile, stopped: make(chan struct{}), socket: socket, threads: "100.0"}
	if f, err := strconv.ParseFloat(threads, 64); err == nil {
		d.threads = strconv.FormatFloat(f, 'f', 1, 64)
	}
	d.logf("Control daemon (stand-in) started for devices %q, pid %d", devices, os.Getpid())
	return d, nil
}

func (d *daemon) logf(format string, args ...any) {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	fmt.Fprintf(d.log, "[%s] %s\n", time.Now().UTC().Format("2006-01-02 15:04:05.000"), fmt.Sprintf(format, args...))
}

func (d *daemon) stop(why string) {
	d.once.Do(func() {
		d.logf("Control daemon exiting: %s", why)
		close(d.stopped)
		_ = d.ln.Close()
	})
}

func (d *daemon) serve() {
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			select {
			case <-d.stopped:
			default:
				d.stop("accept: " + err.Error())
			}
			_ = os.Remove(d.socket)
			_ = d.log.Close()
			return
		}
		go d.handle(conn)
	}
}

// handle answers one command per line, a subset of what
// nvidia-cuda-mps-control takes.
func (d *daemon) handle(conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		cmd := strings.Fields(sc.Text())
		if len(cmd) == 0 {
			continue
		}
		d.logf("Command %q", strings.Join(cmd, " "))
		switch cmd[0] {
		case "get_server_list", "get_device_client_list":
			fmt.Fprintln(conn) // no servers: nothing runs on the fake GPU
		case "get_default_active_thread_percentage":
			d.mu.Lock()
			fmt.Fprintln(conn, d.threads)
			d.mu.Unlock()
		case "set_default_active_thread_percentage":
			if len(cmd) == 2 {
				if f, err := strconv.ParseFloat(cmd[1], 64); err == nil {
					d.mu.Lock()
					d.threads = strconv.FormatFloat(f, 'f', 1, 64)
					d.mu.Unlock()
				}
			}
			fmt.Fprintln(conn, strings.Join(cmd[1:], " "))
		case "set_default_device_pinned_mem_limit":
			fmt.Fprintln(conn, strings.Join(cmd[1:], " "))
		case "quit":
			fmt.Fprintln(conn)
			d.stop("quit")
			return
		default:
			fmt.Fprintf(conn, "Unknown command %q\n", cmd[0])
		}
	}
}

// Control is the stand-in's control client: it sends each line of in to
// the daemon of the pipe directory in its environment, writes each reply
// that is not empty to out, and returns the exit status. Without a daemon
// it says so on errOut, as nvidia-cuda-mps-control does, and fails.
func Control(in io.Reader, out, errOut io.Writer) int {
	socket := filepath.Join(envOr(PipeDirEnv, defaultPipeDir), ControlSocket)
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		fmt.Fprintln(errOut, "Cannot find MPS control daemon process")
		return 1
	}
	defer conn.Close()
	replies := bufio.NewReader(conn)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if _, err := fmt.Fprintln(conn, line); err != nil {
			fmt.Fprintln(errOut, "Cannot find MPS control daemon process")
			return 1
		}
		reply, err := replies.ReadString('\n')
		if err != nil {
			if line == "quit" {
				return 0
			}
			fmt.Fprintln(errOut, "MPS control daemon closed the connection:", err)
			return 1
		}
		if reply = strings.TrimRight(reply, "\n"); reply != "" {
			fmt.Fprintln(out, reply)
		}
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
