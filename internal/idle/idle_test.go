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

package idle

import (
	"testing"
	"time"
)

func pct(v float64) *float64 { return &v }

// TestIdleFleet replays a constructed fleet's samples (one pass a minute
// for an hour) and checks, at the end, which claims are idle and for how
// long.
func TestIdleFleet(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tr := &Tracker{Threshold: 0.05, After: 30 * time.Minute}

	// Utilization of each device at minute m (nil: not reported).
	series := map[string]func(m int) *float64{
		"GPU-idle":       func(int) *float64 { return pct(0) },
		"GPU-busy":       func(int) *float64 { return pct(0.9) },
		"GPU-below":      func(int) *float64 { return pct(0.04) },                                               // under 5 %: idle
		"GPU-at":         func(int) *float64 { return pct(0.05) },                                               // at the threshold: busy
		"GPU-spike":      func(m int) *float64 { return pct(map[bool]float64{true: 0.8, false: 0}[m == 40]) },   // busy once, at minute 40
		"GPU-wokeup":     func(m int) *float64 { return pct(map[bool]float64{true: 0.7, false: 0}[m >= 50]) },   // busy since minute 50
		"GPU-fellasleep": func(m int) *float64 { return pct(map[bool]float64{true: 0.7, false: 0.01}[m < 10]) }, // idle since minute 10
		"MIG-x":          func(int) *float64 { return nil },                                                     // MIG: never reported
		"GPU-gap":        func(m int) *float64 { return map[bool]*float64{true: nil, false: pct(0)}[m == 30] },  // one missed sample at 30
	}
	for m := 0; m <= 60; m++ {
		pass := map[string]*float64{}
		for uuid, f := range series {
			pass[uuid] = f(m)
		}
		tr.Observe(t0.Add(time.Duration(m)*time.Minute), pass)
	}
	now := t0.Add(60 * time.Minute)

	for _, tc := range []struct {
		name       string
		devices    []string
		since      time.Duration // claim first seen prepared, after t0
		wantIdle   time.Duration
		wantKnown  bool
		wantIsIdle bool
	}{
		{"one idle GPU all along", []string{"GPU-idle"}, 0, 60 * time.Minute, true, true},
		{"prepared 10 minutes ago: idle no longer than that", []string{"GPU-idle"}, 50 * time.Minute, 10 * time.Minute, true, false},
		{"a busy GPU", []string{"GPU-busy"}, 0, 0, true, false},
		{"just under the threshold", []string{"GPU-below"}, 0, 60 * time.Minute, true, true},
		{"at the threshold counts as busy", []string{"GPU-at"}, 0, 0, true, false},
		{"one busy sample restarts the clock", []string{"GPU-spike"}, 0, 19 * time.Minute, true, false},
		{"woke up", []string{"GPU-wokeup"}, 0, 0, true, false},
		{"fell asleep at minute 10", []string{"GPU-fellasleep"}, 0, 50 * time.Minute, true, true},
		{"eight GPUs, all idle", []string{"GPU-idle", "GPU-below", "GPU-fellasleep"}, 0, 50 * time.Minute, true, true},
		{"eight GPUs, one busy: not idle", []string{"GPU-idle", "GPU-busy"}, 0, 0, true, false},
		{"a MIG device: unknown, never idle", []string{"MIG-x"}, 0, 0, false, false},
		{"a GPU and a MIG device: unknown", []string{"GPU-idle", "MIG-x"}, 0, 0, false, false},
		{"a missed sample restarts the clock", []string{"GPU-gap"}, 0, 29 * time.Minute, true, false},
		{"no devices", nil, 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := tr.IdleFor(now, t0.Add(tc.since), tc.devices)
			if got != tc.wantIdle || known != tc.wantKnown {
				t.Errorf("IdleFor = %v, known %v; want %v, known %v", got, known, tc.wantIdle, tc.wantKnown)
			}
			if tr.Idle(got) != tc.wantIsIdle {
				t.Errorf("Idle(%v) = %v, want %v", got, tr.Idle(got), tc.wantIsIdle)
			}
		})
	}
}

func TestIdleForgetsDevicesNotSampled(t *testing.T) {
	t0 := time.Now()
	tr := &Tracker{Threshold: 0.05, After: time.Minute}
	tr.Observe(t0, map[string]*float64{"GPU-a": pct(0)})
	tr.Observe(t0.Add(time.Hour), map[string]*float64{"GPU-b": pct(0)})
	if _, known := tr.IdleFor(t0.Add(time.Hour), t0, []string{"GPU-a"}); known {
		t.Error("a device missing from the last pass is still known")
	}
	tr.Observe(t0.Add(2*time.Hour), map[string]*float64{"GPU-a": pct(0)})
	if got, _ := tr.IdleFor(t0.Add(2*time.Hour), t0, []string{"GPU-a"}); got != 0 {
		t.Errorf("a device back after a gap is idle for %v, want 0 (its history restarts)", got)
	}
}
