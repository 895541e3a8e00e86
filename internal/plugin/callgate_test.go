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
	"time"
)

// Background work waits for the kubelet's calls in flight, and only for
// them: at once on an idle node, until the last call ends, and never
// longer than maxYield.
func TestCallGateYield(t *testing.T) {
	ctx := context.Background()
	var g callGate

	start := time.Now()
	g.yield(ctx)
	if d := time.Since(start); d > maxYield/2 {
		t.Fatalf("yield with no call in flight took %v", d)
	}

	exit1, exit2 := g.enter(), g.enter()
	done := make(chan time.Time, 1)
	go func() { g.yield(ctx); done <- time.Now() }()
	time.Sleep(20 * time.Millisecond)
	exit1()
	select {
	case <-done:
		t.Fatal("yield returned while a call was still in flight")
	case <-time.After(20 * time.Millisecond):
	}
	ended := time.Now()
	exit2()
	if at := <-done; at.Before(ended) {
		t.Fatal("yield returned before the last call ended")
	}

	// A node that is never quiet still gets its background work done.
	exit := g.enter()
	defer exit()
	start = time.Now()
	g.yield(ctx)
	if d := time.Since(start); d < maxYield || d > 10*maxYield {
		t.Fatalf("yield with a call that never ends took %v, want about %v", d, maxYield)
	}
}
