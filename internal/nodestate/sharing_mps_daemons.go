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

package nodestate

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/mps"
)

// The node state's view of its MPS daemons for the plugin: how many run,
// whether they answer (the plugin's periodic check), and replacing one
// that does not.

// MPSDaemonCount is how many MPS control daemons the node state runs (as
// recorded Running): the plugin's metrics report it.
func (s *State) MPSDaemonCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.cp.MPSDaemons {
		if d.State == checkpoint.DaemonRunning {
			n++
		}
	}
	return n
}

// MPSDaemons returns the daemons as recorded, by ID.
func (s *State) MPSDaemons() map[string]checkpoint.MPSDaemon {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.cp.MPSDaemons)
}

// DaemonHealth is whether a running MPS daemon answers.
type DaemonHealth struct {
	// ID is the daemon's, which is also the device it serves.
	ID      string
	GPUUUID string
	// Err says why it does not answer; nil when it does.
	Err error
}

// CheckDaemons asks every daemon recorded as Running whether it answers,
// all at once: a hung one takes the probe timeout, and must not hold up
// the others' answers.
func (s *State) CheckDaemons(ctx context.Context) []DaemonHealth {
	daemons := s.MPSDaemons()
	ids := slices.Sorted(maps.Keys(daemons))
	out := make([]DaemonHealth, 0, len(ids))
	var wg sync.WaitGroup
	var mu sync.Mutex // guards out, which the probes append to
	for _, id := range ids {
		rec := daemons[id]
		if rec.State != checkpoint.DaemonRunning {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := DaemonHealth{ID: id, GPUUUID: rec.GPUUUID}
			if d, err := (mpsStrategy{}).daemonFor(s, id, rec.DeviceUUID); err != nil {
				h.Err = err
			} else {
				h.Err = (mpsStrategy{}).probe(ctx, s, d)
			}
			mu.Lock()
			out = append(out, h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b DaemonHealth) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// RestartDaemon replaces a daemon that stopped answering (it died, hung,
// or lost its directory): the old process is killed, the directories are
// made again, and a new one is started; unless the daemon is no longer
// wanted, or answers again.
func (s *State) RestartDaemon(ctx context.Context, id string) error {
	s.mu.Lock()
	rec, ok := s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	unlock := s.gpuLocks.lock(rec.GPUUUID)
	defer unlock()
	s.mu.Lock()
	rec, ok = s.cp.MPSDaemons[id]
	s.mu.Unlock()
	if !ok || rec.State != checkpoint.DaemonRunning {
		return nil
	}
	daemon, err := (mpsStrategy{}).daemonFor(s, id, rec.DeviceUUID)
	if err != nil {
		return err
	}
	if err := (mpsStrategy{}).probe(ctx, s, daemon); err == nil || ctx.Err() != nil {
		// Answers again, or the probe was cut short (the plugin stops):
		// a daemon must outlive its plugin.
		return ctx.Err()
	}
	klog.FromContext(ctx).Info("MPS control daemon does not answer; replacing it", "mpsDaemon", id)
	if err := s.opts.MPS.Kill(ctx, daemon); err != nil {
		return err
	}
	if err := makeDaemonDirs(daemon); err != nil {
		return err
	}
	if err := s.opts.MPS.Start(ctx, daemon); err != nil {
		return err
	}
	// A new daemon answers in well under a second (a pod in a few): a
	// replacement that does not within the budget is retried at the next
	// check rather than holding the GPU's lock, and so its co-tenants'
	// prepares, for a minute.
	timeout := min(s.opts.MPSReadyTimeout, restartReadyBudget)
	if timeout == 0 {
		timeout = restartReadyBudget
	}
	return mps.WaitReady(ctx, daemon, timeout)
}
