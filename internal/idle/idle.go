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

// Package idle tells which claims hold GPUs they do not use: a claim is
// idle once every one of its devices has reported a utilization below a
// threshold, sample after sample, for a configured time.
//
// The kubelet plugin feeds it the utilization it reads from NVML on every
// sampling pass and exports the answer per claim; the time a claim counts
// as idle never starts before the plugin saw it prepared, so a GPU that
// sat free for hours is not "idle for hours" the moment a pod gets it. A
// device whose utilization is unknown (a MIG device, a GPU in MIG mode, a
// missed sample) makes its claim's idleness unknown rather than idle:
// gpudra never calls a claim idle without evidence.
package idle

import (
	"time"
)

// Tracker follows devices' utilization. It is not safe for concurrent use.
type Tracker struct {
	// Threshold is the utilization (0-1) below which a device counts as
	// idle, e.g. 0.05.
	Threshold float64
	// After is how long a claim must stay idle to be reported as idle.
	After time.Duration

	// below holds, per device UUID, since when its samples have all been
	// below the threshold; a busy or unknown device is absent.
	below map[string]time.Time
	// known are the devices whose last sample had a utilization.
	known map[string]bool
}

// Observe records one sampling pass at time now: the utilization of every
// device sampled, by UUID (nil: the device did not report it). Devices not
// in the pass lose their history.
func (t *Tracker) Observe(now time.Time, utilization map[string]*float64) {
	next := make(map[string]time.Time, len(utilization))
	t.known = make(map[string]bool, len(utilization))
	for uuid, u := range utilization {
		if u == nil {
			continue
		}
		t.known[uuid] = true
		if *u >= t.Threshold {
			continue
		}
		since, ok := t.below[uuid]
		if !ok {
			since = now
		}
		next[uuid] = since
	}
	t.below = next
}

// IdleFor says how long all the devices have been below the threshold, at
// most since claimSince (when the claim was first seen prepared). known is
// false when a device's utilization is unknown; a busy device gives 0.
func (t *Tracker) IdleFor(now, claimSince time.Time, uuids []string) (idle time.Duration, known bool) {
	if len(uuids) == 0 {
		return 0, false
	}
	start := claimSince
	for _, u := range uuids {
		if !t.known[u] {
			return 0, false
		}
		since, below := t.below[u]
		if !below {
			return 0, true
		}
		if since.After(start) {
			start = since
		}
	}
	if now.Before(start) {
		return 0, true
	}
	return now.Sub(start), true
}

// Idle reports whether an idle time reaches After.
func (t *Tracker) Idle(idleFor time.Duration) bool { return t.After > 0 && idleFor >= t.After }
