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
	"sync"
	"time"
)

// The kubelet's calls first. Eight pods landing on a node at once are
// eight NodePrepareResources calls in flight together, and each prepare
// that changes which GPUs are held asks for a republish and queues a
// claim status write. Run at once, that background work (building the
// node's slices, the ResourceSlice controller's comparison, eight status
// applies) takes the CPU from the prepares still in flight, whose pods
// are what waits. So the republish and the status writer wait until no
// kubelet call is in flight, or at most maxYield on a node that is never
// quiet, and then do everything that queued meanwhile at once.

// maxYield bounds how long background work waits for the kubelet's calls
// to end.
const maxYield = 500 * time.Millisecond

// callGate counts the kubelet's calls in flight.
type callGate struct {
	// mu guards n and idle.
	mu sync.Mutex
	// n is the number of calls in flight.
	n int
	// idle is closed when n drops to zero; replaced when it rises again.
	idle chan struct{}
}

// enter records a call; the caller must call the function returned when
// the call ends.
func (g *callGate) enter() (exit func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.n--
		if g.n == 0 {
			close(g.idle)
		}
		g.mu.Unlock()
	}
}

// yield waits until no call is in flight, at most maxYield, or until ctx
// ends.
func (g *callGate) yield(ctx context.Context) {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	idle := g.idle
	g.mu.Unlock()
	t := time.NewTimer(maxYield)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}
