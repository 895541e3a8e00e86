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
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/plugin"
)

// mpsShareOnGPU0 is an MPS share of gpu-0's memory.
func mpsShareOnGPU0(name string) *resourceapi.ResourceClaim {
	claim := shareClaim(name, "20Gi", "", mpsSharing)
	claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors("device.attributes['gpu.gpudra.io'].minor == 0")
	return claim
}

// setComputeMode sets a fake GPU's compute mode from a second process on
// the node, as an admin's nvidia-smi -c would.
func setComputeMode(t testing.TB, c *Cluster, uuid string, mode nvml.ComputeMode) {
	t.Helper()
	s := nodeNVML(t, c)
	defer s.Shutdown()
	d, ret := s.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := d.SetComputeMode(mode); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
}

// startHookedSharedCluster is startSharedCluster with fault hooks.
func startHookedSharedCluster(t *testing.T, hooks nodestate.Hooks) (context.Context, *Cluster) {
	t.Helper()
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	c.Stop()
	c.Opts.Hooks = hooks
	c, err := Start(ctx, c.Opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(); stopAllDaemons(t, c) })
	return ctx, c
}

// unprepareErr unprepares a claim as the kubelet does and returns the
// plugin's error for it.
func unprepareErr(ctx context.Context, t *testing.T, c *Cluster, claim *resourceapi.ResourceClaim) error {
	t.Helper()
	resp, err := c.NodeUnprepareResources(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if msg := resp.Claims[string(claim.UID)].Error; msg != "" {
		return errors.New(msg)
	}
	return nil
}

// assertSharingUndone checks the sharing invariants once no claim is left:
// the GPU in the compute mode it had before gpudra, no daemon process, no
// daemon or compute-mode record.
func assertSharingUndone(t *testing.T, c *Cluster, uuid string, want nvml.ComputeMode) {
	t.Helper()
	if got := policyOf(t, c, uuid).computeMode; got != want {
		t.Errorf("compute mode %d after the last MPS claim went, want %d, the mode before gpudra", got, want)
	}
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemon processes %v left", got)
	}
	if got := c.Driver.State().MPSDaemons(); len(got) != 0 {
		t.Errorf("daemon records %v left", got)
	}
	if n := len(c.Driver.State().PreparedClaims()); n != 0 {
		t.Errorf("%d claims left", n)
	}
}

// TestComputeModeRestoredInEveryOrder: the last MPS claim's unprepare fails
// half-way through stopping its daemon (the stop fails, or removing its
// directories does); before the kubelet retries, another MPS claim on the
// GPU is prepared (with or without a plugin restart in between), and the
// claims go in either order. Once both are gone, the GPU is in the mode it
// had before gpudra, never gpudra's own exclusive-process.
func TestComputeModeRestoredInEveryOrder(t *testing.T) {
	errFail := errors.New("simulated failure")
	// The GPU starts in a mode that is neither gpudra's nor the default,
	// as an admin may have left it: only a restore of exactly it passes.
	for _, pre := range []nvml.ComputeMode{nvml.COMPUTEMODE_PROHIBITED} {
		for _, failAt := range []string{nodestate.StepDaemonStopping, nodestate.StepDaemonStopped} {
			for _, order := range []string{"new-claim-then-retry", "new-claim-goes-first", "restart-new-claim-retry"} {
				t.Run(fmt.Sprintf("mode%d/%s/%s", pre, failAt, order), func(t *testing.T) {
					t.Parallel()
					var mu sync.Mutex
					armed := false
					ctx, c := startHookedSharedCluster(t, nodestate.Hooks{AfterSharingStep: func(_ string, step string) error {
						mu.Lock()
						defer mu.Unlock()
						if armed && step == failAt {
							armed = false
							return errFail
						}
						return nil
					}})
					uuid := uuidOf(t, c, "gpu-0")
					setComputeMode(t, c, uuid, pre)
					a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
					if err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					armed = true
					mu.Unlock()
					if err := unprepareErr(ctx, t, c, a.Claims[0].Claim); err == nil {
						t.Fatal("the injected failure did not fail the unprepare")
					}
					if order == "restart-new-claim-retry" {
						c.Stop()
						c.Opts.Hooks = nodestate.Hooks{}
						if c, err = Start(ctx, c.Opts, c.Client); err != nil {
							t.Fatal(err)
						}
						t.Cleanup(c.Stop)
					}
					b, err := createAndRun(ctx, t, c, mpsShareOnGPU0("b"))
					if err != nil {
						t.Fatal(err)
					}
					first, second := a.Claims[0].Claim, b.Claims[0].Claim
					if order == "new-claim-goes-first" {
						first, second = second, first
					}
					for _, claim := range []*resourceapi.ResourceClaim{first, second} {
						if err := unprepareErr(ctx, t, c, claim); err != nil {
							t.Fatalf("unprepare %s: %v", claim.Name, err)
						}
					}
					assertSharingUndone(t, c, uuid, pre)
				})
			}
		}
	}
}

// editCheckpoint changes the plugin's checkpoint by hand (the plugin is
// stopped), as an operator, a bug or an older gpudra might have left it.
func editCheckpoint(t *testing.T, c *Cluster, edit func(cp *checkpoint.Checkpoint)) {
	t.Helper()
	store := checkpoint.NewStore(filepath.Join(c.Opts.PluginDataDir(), plugin.CheckpointFile))
	cp, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	edit(cp)
	if err := store.Save(cp); err != nil {
		t.Fatal(err)
	}
}

// TestComputeModeSurvivesEditedDaemonRecords: the record of a running MPS
// daemon is deleted, left Stopping, loses its previous compute mode, holds
// a mode that does not exist or names a GPU the node does not have. The
// plugin restarts, a second claim joins the GPU, and both claims go: every
// unprepare succeeds and the GPU ends in its mode from before gpudra.
func TestComputeModeSurvivesEditedDaemonRecords(t *testing.T) {
	const unknownGPU = "GPU-00000000-dead-beef-0000-000000000000"
	edits := map[string]func(d *checkpoint.MPSDaemon){
		"record deleted":                nil,
		"left Stopping":                 func(d *checkpoint.MPSDaemon) { d.State = checkpoint.DaemonStopping },
		"previous mode dropped":         func(d *checkpoint.MPSDaemon) { d.PreviousComputeMode = nil },
		"previous mode 99":              func(d *checkpoint.MPSDaemon) { d.PreviousComputeMode = ptr.To(99) },
		"GPU the node does not have":    func(d *checkpoint.MPSDaemon) { d.GPUUUID = unknownGPU },
		"device the node does not have": func(d *checkpoint.MPSDaemon) { d.DeviceUUID = unknownGPU },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, c := startSharedCluster(t, "dgx-h100", "None")
			uuid := uuidOf(t, c, "gpu-0")
			setComputeMode(t, c, uuid, nvml.COMPUTEMODE_PROHIBITED)
			a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
			if err != nil {
				t.Fatal(err)
			}
			c.Stop()
			editCheckpoint(t, c, func(cp *checkpoint.Checkpoint) {
				if edit == nil {
					delete(cp.MPSDaemons, "gpu-0")
					return
				}
				d := cp.MPSDaemons["gpu-0"]
				edit(&d)
				cp.MPSDaemons["gpu-0"] = d
			})
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			b, err := createAndRun(ctx, t, c, mpsShareOnGPU0("b"))
			if err != nil {
				t.Fatal(err)
			}
			for _, claim := range []*resourceapi.ResourceClaim{a.Claims[0].Claim, b.Claims[0].Claim} {
				if err := unprepareErr(ctx, t, c, claim); err != nil {
					t.Fatalf("unprepare %s: %v", claim.Name, err)
				}
			}
			assertSharingUndone(t, c, uuid, nvml.COMPUTEMODE_PROHIBITED)
		})
	}
}

// TestComputeModeWithNoRecordLeft: every record of the GPU's earlier mode
// is gone (the daemon's and the GPU's, a hand-edited checkpoint) while
// gpudra's daemon runs and holds the GPU in exclusive-process. What it was
// before cannot be known any more; gpudra then restores Default, the mode
// a GPU boots in, never its own exclusive-process.
func TestComputeModeWithNoRecordLeft(t *testing.T) {
	t.Parallel()
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	uuid := uuidOf(t, c, "gpu-0")
	setComputeMode(t, c, uuid, nvml.COMPUTEMODE_PROHIBITED)
	a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	editCheckpoint(t, c, func(cp *checkpoint.Checkpoint) {
		delete(cp.MPSDaemons, "gpu-0")
		cp.ComputeModes = nil
	})
	if c, err = Start(ctx, c.Opts, c.Client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := unprepareErr(ctx, t, c, a.Claims[0].Claim); err != nil {
		t.Fatal(err)
	}
	assertSharingUndone(t, c, uuid, nvml.COMPUTEMODE_DEFAULT)
}
