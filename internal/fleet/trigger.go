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
	"time"
)

// Trigger runs a recompute after changes, at most once per MinInterval:
// events that arrive while a recompute runs or waits fold into one, so a
// burst of a thousand claim events costs one or two recomputes, and a
// steady stream costs one per MinInterval.
type Trigger struct {
	// MinInterval is the least time between the starts of two runs.
	MinInterval time.Duration
	pending     chan struct{}
}

// NewTrigger returns a trigger with one change already pending, so the
// first Run computes at once.
func NewTrigger(minInterval time.Duration) *Trigger {
	t := &Trigger{MinInterval: minInterval, pending: make(chan struct{}, 1)}
	t.Notify()
	return t
}

// Notify records a change; it never blocks.
func (t *Trigger) Notify() {
	select {
	case t.pending <- struct{}{}:
	default: // a run is already pending
	}
}

// Run calls fn after each change, no sooner than MinInterval after the
// previous call started, until ctx is done. (Not a wait loop: it runs on
// a change, the time only holds it back.)
func (t *Trigger) Run(ctx context.Context, fn func(context.Context)) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.pending:
		}
		if wait := t.MinInterval - time.Since(last); !last.IsZero() && wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		// Changes from here on need another run; those before are
		// covered by this one.
		select {
		case <-t.pending:
		default:
		}
		last = time.Now()
		fn(ctx)
	}
}
