// Package mpsstandin is the fake backend's MPS control daemon: a real
// process that does, for the plugin, what nvidia-cuda-mps-control -f does
// on a GPU node. It reads the same environment (CUDA_MPS_PIPE_DIRECTORY,
// CUDA_MPS_LOG_DIRECTORY, CUDA_VISIBLE_DEVICES), creates the pipe and log
// directories, writes control.log, and listens on the control socket
// <pipe directory>/control until it is told to quit or gets SIGTERM.
//
// It runs nothing on a GPU; what it makes testable for real is the
// daemon's lifecycle: one process per shared device, started, adopted
// after a plugin restart, restarted when it dies, and stopped.
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
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Subcommand is the first argument that makes a binary the stand-in.
const Subcommand = "fake-mps-control-daemon"

// Environment variables the stand-in reads, as nvidia-cuda-mps-control
// does, and their defaults (the MPS documentation's).
const (
	PipeDirEnv     = "CUDA_MPS_PIPE_DIRECTORY"
	LogDirEnv      = "CUDA_MPS_LOG_DIRECTORY"
	defaultPipeDir = "/tmp/nvidia-mps"
	defaultLogDir  = "/var/log/nvidia-mps"
)

// ControlSocket is the name of the control daemon's socket in the pipe
// directory.
const ControlSocket = "control"

// init runs the stand-in and exits if the process was started as it (its
// first argument is Subcommand).
func init() {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Main())
	}
}

// Main runs the stand-in until it is told to quit or signalled, and
// returns the exit status.
func Main() int {
	pipeDir := envOr(PipeDirEnv, defaultPipeDir)
	logDir := envOr(LogDirEnv, defaultLogDir)
	d, err := start(pipeDir, logDir, os.Getenv("CUDA_VISIBLE_DEVICES"))
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
	go d.watchSocket(time.Second)
	d.serve()
	return 0
}

// watchSocket stops the daemon once its control socket is gone (its pipe
// directory was removed): no client can reach it any more, and a stand-in
// whose directory a test removed must not outlive the test.
func (d *daemon) watchSocket(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.stopped:
			return
		case <-t.C:
			if _, err := os.Stat(d.socket); err != nil {
				d.stop("control socket gone: " + err.Error())
				return
			}
		}
	}
}

type daemon struct {
	ln      net.Listener
	log     *os.File
	logMu   sync.Mutex
	once    sync.Once
	stopped chan struct{}
	socket  string
}

func start(pipeDir, logDir, devices string) (*daemon, error) {
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
	d := &daemon{ln: ln, log: logFile, stopped: make(chan struct{}), socket: socket}
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
		case "set_default_active_thread_percentage", "set_default_device_pinned_mem_limit":
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
