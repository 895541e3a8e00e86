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

package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// TestEditedCheckpointTouchesOnlyGPUDRAsDirectories: a daemon record whose
// dir, or a claim whose MPS daemon name, points outside the plugin's MPS
// directory (a hand-edited or corrupted checkpoint) never makes the plugin
// delete that directory, and the claim can still be unprepared.
func TestEditedCheckpointTouchesOnlyGPUDRAsDirectories(t *testing.T) {
	for name, edit := range map[string]func(cp *checkpoint.Checkpoint, mpsDir, victim string){
		"daemon dir": func(cp *checkpoint.Checkpoint, _, victim string) {
			d := cp.MPSDaemons["gpu-0"]
			d.Dir = victim
			cp.MPSDaemons["gpu-0"] = d
		},
		"claim's daemon name": func(cp *checkpoint.Checkpoint, mpsDir, victim string) {
			rel, err := filepath.Rel(mpsDir, victim)
			if err != nil {
				panic(err)
			}
			for uid, c := range cp.Claims {
				for i := range c.Devices {
					if sh := c.Devices[i].Sharing; sh != nil {
						sh.MPSDaemon = rel
					}
				}
				cp.Claims[uid] = c
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, c := startSharedCluster(t, "dgx-h100", "None")
			victim := filepath.Join(c.Opts.Dir, "precious")
			if err := os.MkdirAll(filepath.Join(victim, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
			if err != nil {
				t.Fatal(err)
			}
			c.Stop()
			editCheckpoint(t, c, func(cp *checkpoint.Checkpoint) { edit(cp, c.Opts.MPSDir(), victim) })
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			if err := unprepareErr(ctx, t, c, a.Claims[0].Claim); err != nil {
				t.Errorf("unprepare: %v", err)
			}
			c.Stop()
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			if !exists(filepath.Join(victim, "data")) {
				t.Errorf("the plugin deleted %s, outside its MPS directory %s", victim, c.Opts.MPSDir())
			}
		})
	}
}

// TestTimeSliceOfAbsentGPUForgotten: a time slice recorded for a GPU the
// node no longer has (it was taken out) is forgotten at start-up instead
// of failing every start-up for good.
func TestTimeSliceOfAbsentGPUForgotten(t *testing.T) {
	t.Parallel()
	ctx, c := startCluster(t, "dgx-h100")
	c.Stop()
	editCheckpoint(t, c, func(cp *checkpoint.Checkpoint) {
		cp.TimeSlices = map[string]int{"GPU-00000000-dead-beef-0000-000000000000": 3}
	})
	c, err := Start(ctx, c.Opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if ts := c.Driver.State().TimeSlices(); len(ts) != 0 {
		t.Errorf("time slices %v still recorded", ts)
	}
}
