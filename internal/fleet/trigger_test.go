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
	"sync/atomic"
	"testing"
	"time"
)

func TestTriggerBoundsRecomputes(t *testing.T) {
	const interval = 200 * time.Millisecond
	tr := NewTrigger(interval)
	var runs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx, func(context.Context) { runs.Add(1) })
	}()
	waitFor := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runs.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("runs = %d, want %d", runs.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(1) // the initial computation

	// A burst of 1000 events: one more run (maybe two, if the burst
	// straddles a run), not a thousand.
	start := time.Now()
	for range 1000 {
		tr.Notify()
	}
	waitFor(2)
	time.Sleep(3 * interval)
	if got := runs.Load(); got < 2 || got > 3 {
		t.Errorf("after a burst of 1000 events: %d runs in total, want 2 or 3", got)
	}
	if took := time.Since(start); took < interval {
		t.Errorf("the burst's run came %v after the previous one, sooner than MinInterval", took)
	}

	// A steady stream (an event every 10ms for 1s): about one run per
	// interval.
	before := runs.Load()
	stream := time.Now()
	for time.Since(stream) < time.Second {
		tr.Notify()
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * interval)
	got := runs.Load() - before
	if max := int32(time.Second/interval) + 2; got < 3 || got > max {
		t.Errorf("a steady 100 events/s for 1s caused %d runs, want between 3 and %d", got, max)
	}

	// No events, no runs.
	idle := runs.Load()
	time.Sleep(3 * interval)
	if runs.Load() != idle {
		t.Error("runs without events")
	}
	cancel()
	<-done
}
