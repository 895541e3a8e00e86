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

package plugin

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Background work waits for the kubelet's calls in flight, and only for
// them: at once on an idle node, until the last call ends, and never
// longer than maxYield. In a synctest bubble: the clock moves only when
// every goroutine waits, so "at once" and "maxYield" are exact, whatever
// else the machine is doing (with the real clock, a loaded machine made
// the waits here longer than the bounds).
func TestCallGateYield(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var g callGate

		start := time.Now()
		g.yield(ctx)
		if d := time.Since(start); d != 0 {
			t.Fatalf("yield with no call in flight took %v, want no time", d)
		}

		exit1, exit2 := g.enter(), g.enter()
		done := make(chan time.Time, 1)
		go func() { g.yield(ctx); done <- time.Now() }()
		synctest.Wait() // yield waits
		exit1()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("yield returned while a call was still in flight")
		default:
		}
		time.Sleep(maxYield / 2)
		ended := time.Now()
		exit2()
		synctest.Wait()
		select {
		case at := <-done:
			if !at.Equal(ended) {
				t.Fatalf("yield returned %v after the last call ended, want at once", at.Sub(ended))
			}
		default:
			t.Fatal("yield still waits after the last call ended")
		}

		// A node that is never quiet still gets its background work done.
		exit := g.enter()
		defer exit()
		start = time.Now()
		g.yield(ctx)
		if d := time.Since(start); d != maxYield {
			t.Fatalf("yield with a call that never ends took %v, want %v", d, maxYield)
		}
	})
}
