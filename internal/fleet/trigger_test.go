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

package fleet

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The trigger folds events into runs at most one per MinInterval. In a
// synctest bubble: the clock moves only when every goroutine waits, so
// the number of runs is exact, whatever else the machine is doing (with
// the real clock, a loaded machine delayed the runs, the events and the
// test's sleeps by different amounts).
func TestTriggerBoundsRecomputes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 200 * time.Millisecond
		tr := NewTrigger(interval)
		var mu sync.Mutex
		var starts []time.Time
		runs := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(starts)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr.Run(ctx, func(context.Context) {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
			})
		}()
		synctest.Wait()
		if got := runs(); got != 1 {
			t.Fatalf("%d runs before any event, want the initial one", got)
		}

		// A burst of 1000 events: one more run, MinInterval after the
		// first, not a thousand.
		for range 1000 {
			tr.Notify()
		}
		synctest.Wait()
		if got := runs(); got != 1 {
			t.Errorf("a burst right after a run ran at once (%d runs), want it held back MinInterval", got)
		}
		time.Sleep(3 * interval)
		if got := runs(); got != 2 {
			t.Errorf("after a burst of 1000 events: %d runs in total, want 2", got)
		}

		// A steady stream (an event every 10ms for 1s): one run at its
		// first event (the last run is long past), then one per
		// interval, the last covering the last event.
		before := runs()
		stream := time.Now()
		for time.Since(stream) < time.Second {
			tr.Notify()
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * interval)
		if got, want := runs()-before, int(time.Second/interval)+1; got != want {
			t.Errorf("a steady 100 events/s for 1s caused %d runs, want %d", got, want)
		}

		// No events, no runs.
		idle := runs()
		time.Sleep(3 * interval)
		if runs() != idle {
			t.Error("runs without events")
		}
		cancel()
		<-done

		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < interval {
				t.Errorf("run %d started %v after the previous one, sooner than MinInterval %v", i, gap, interval)
			}
		}
	})
}
