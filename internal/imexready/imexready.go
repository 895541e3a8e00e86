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

// Package imexready says whether the node's IMEX daemon is ready to serve
// the IMEX channels of its NVLink domain (docs/nvlink.md). It asks the
// daemon the way NVIDIA documents, by running nvidia-imex-ctl -q against
// the daemon's control socket and requiring exactly "READY", and keeps
// asking at an interval, so that the plugin can publish the answer (the
// scheduler then keeps new multi-node work off a node whose daemon stopped
// answering) and a prepare can read it without waiting for a process.
package imexready

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
)

// readyAnswer is what nvidia-imex-ctl -q prints, exactly, when the local
// daemon is ready (NVIDIA's compute-domain daemon and host-managed mode
// require the same); anything else is not ready.
const readyAnswer = "READY\n"

// Defaults of Prober's fields.
const (
	// DefaultInterval: a daemon that stops answering keeps new
	// multi-node work off its node within about this long, plus the
	// republish and gpudra-controller's relabelling (seconds).
	DefaultInterval = 5 * time.Second
	// DefaultTimeout bounds one query. A daemon under SIGSTOP never
	// answers: it must count as not ready, not hold the prober.
	DefaultTimeout = 3 * time.Second
	// DefaultSocket is IMEX_CMD_UNIX_DOMAIN_PATH as NVIDIA documents it
	// for its driver's host-managed IMEX mode.
	DefaultSocket = "/etc/nvidia-imex/imex_ctrl.sock"
)

// Prober asks the node's IMEX daemon whether it is ready and remembers the
// last answer. Its methods are safe for concurrent use.
type Prober struct {
	// Ctl runs nvidia-imex-ctl (the backend's IMEXCtl).
	Ctl gpu.ToolCommand
	// Socket is the daemon's control socket, given as --u=<socket>.
	Socket string
	// Interval between two queries of Run; DefaultInterval when zero.
	Interval time.Duration
	// Timeout bounds one query; DefaultTimeout when zero.
	Timeout time.Duration

	// mu guards last and at: the last answer and when it was had.
	mu   sync.Mutex
	last error
	at   time.Time
}

// errNotAsked is the answer before the first query.
var errNotAsked = errors.New("the IMEX daemon has not been asked yet")

// Probe asks the daemon once, remembers the answer and returns it: nil
// when it answered READY, otherwise an error that says what it answered
// and what to check.
func (p *Prober) Probe(ctx context.Context) error {
	err := p.query(ctx)
	p.mu.Lock()
	p.last, p.at = err, time.Now()
	p.mu.Unlock()
	return err
}

func (p *Prober) query(ctx context.Context) error {
	if len(p.Ctl.Args) == 0 {
		return errors.New("no nvidia-imex-ctl to ask the IMEX daemon with")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string{}, p.Ctl.Args[1:]...), "-q", "--u="+p.Socket)
	cmd := exec.CommandContext(ctx, p.Ctl.Args[0], args...)
	cmd.Env = p.Ctl.Env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A hung daemon can leave the client waiting: WaitDelay makes Wait
	// return once the context killed it, even if a child holds the pipes.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if out.String() == readyAnswer && err == nil {
		return nil
	}
	what := strings.TrimSpace(out.String() + " " + errOut.String())
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("the IMEX daemon did not answer %s -q --u=%s within %s (hung, or its control service is off: check IMEX_CMD_ENABLED=1 and IMEX_CMD_UNIX_DOMAIN_PATH=%s in its config)", p.Ctl.Args[0], p.Socket, timeout, p.Socket)
	case err != nil && what == "":
		return fmt.Errorf("%s -q --u=%s: %w (is the nvidia-imex service running on this node, with IMEX_CMD_UNIX_DOMAIN_PATH=%s?)", p.Ctl.Args[0], p.Socket, err, p.Socket)
	default:
		return fmt.Errorf("the IMEX daemon is not ready: %s -q --u=%s answered %q", p.Ctl.Args[0], p.Socket, what)
	}
}

// Last returns when the daemon was last asked (the zero time before the
// first query) and its answer.
func (p *Prober) Last() (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at.IsZero() {
		return p.at, errNotAsked
	}
	return p.at, p.last
}

// Ready implements the node state's IMEXReadiness for a prepare: the last
// answer while it is fresher than two intervals (a prepare then costs no
// process), else a query of its own. The daemon serves the node's own
// domain: domain only names it in the error.
func (p *Prober) Ready(ctx context.Context, domain string) error {
	at, err := p.Last()
	if at.IsZero() || time.Since(at) > 2*p.interval() {
		err = p.Probe(ctx)
	}
	if err != nil {
		return fmt.Errorf("NVLink domain %s: %w", domain, err)
	}
	return nil
}

func (p *Prober) interval() time.Duration {
	if p.Interval <= 0 {
		return DefaultInterval
	}
	return p.Interval
}

// Run asks the daemon every interval until ctx ends, while active says
// so (nil: always; the plugin asks only while its node is in an NVLink
// domain, where a daemon is expected), and calls changed with the answer
// after the first query of each active stretch and each time readiness
// flips (ready to not ready or back), from Run's goroutine.
func (p *Prober) Run(ctx context.Context, active func() bool, changed func(ready bool, err error)) {
	logger := klog.FromContext(ctx)
	first, was := true, false
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if active != nil && !active() {
			first = true
			return
		}
		err := p.Probe(ctx)
		if ctx.Err() != nil {
			return // stopping: a killed query says nothing about the daemon
		}
		ready := err == nil
		if !first && ready == was {
			return
		}
		if ready {
			logger.Info("IMEX daemon ready", "socket", p.Socket)
		} else {
			logger.Info("IMEX daemon not ready", "socket", p.Socket, "err", err)
		}
		first, was = false, ready
		changed(ready, err)
	}, p.interval())
}
