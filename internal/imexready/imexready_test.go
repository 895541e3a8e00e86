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

package imexready_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/imexready"
	"github.com/gpudra/gpudra/internal/imexstandin"
)

// queryTimeout bounds a query in these tests. The client is this test
// binary started again, which under the race detector on a loaded machine
// takes seconds to start (the real nvidia-imex-ctl is a small program):
// the tests must not read a slow start as a hung daemon.
const queryTimeout = 10 * time.Second

// ctl is the stand-in's nvidia-imex-ctl in this test binary, which
// imexstandin's init turns into the client when it is the first argument.
func ctl(t *testing.T) gpu.ToolCommand {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return gpu.ToolCommand{Args: []string{self, imexstandin.CtlSubcommand}}
}

func TestProbeFollowsTheDaemon(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	d, socket := gpudratest.IMEXDaemon(t)
	p := &imexready.Prober{Ctl: ctl(t), Socket: socket, Timeout: queryTimeout}
	if _, err := p.Last(); err == nil {
		t.Fatal("Last before any query says ready")
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return p.Probe(ctx) == nil, nil
	}); err != nil {
		_, last := p.Last()
		t.Fatalf("a serving stand-in never answered READY: %v", last)
	}
	if err := p.Ready(ctx, "d.1"); err != nil {
		t.Errorf("Ready after READY: %v", err)
	}

	// Hung (as under SIGSTOP): the query times out, and the error says so.
	d.Hang()
	err := p.Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("a hung daemon: %v, want an error saying it did not answer", err)
	}
	if err := p.Ready(ctx, "d.1"); err == nil || !strings.Contains(err.Error(), "NVLink domain d.1") {
		t.Errorf("Ready of a hung daemon: %v, want an error naming the domain", err)
	}
}

func TestProbeWithoutDaemonNamesTheSocket(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	socket := filepath.Join(t.TempDir(), "none.sock")
	p := &imexready.Prober{Ctl: ctl(t), Socket: socket}
	err := p.Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), socket) {
		t.Fatalf("no daemon: %v, want an error naming %s", err, socket)
	}
	p = &imexready.Prober{Socket: socket}
	if err := p.Probe(ctx); err == nil {
		t.Fatal("a prober without nvidia-imex-ctl says ready")
	}
}

func TestRunReportsFlips(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d, socket := gpudratest.IMEXDaemon(t)
	p := &imexready.Prober{Ctl: ctl(t), Socket: socket, Interval: 50 * time.Millisecond, Timeout: queryTimeout}
	var mu sync.Mutex
	var seen []bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, nil, func(ready bool, _ error) {
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 || seen[len(seen)-1] != ready {
				seen = append(seen, ready)
			}
		})
	}()
	waitFor := func(want ...bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) > 0 && seen[len(seen)-1] == want[len(want)-1], nil
		}); err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("Run reported %v, want it to end with %v", seen, want)
		}
	}
	waitFor(true)
	d.Hang()
	waitFor(true, false)
	cancel()
	<-done
}
