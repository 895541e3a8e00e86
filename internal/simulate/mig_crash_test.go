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
	"errors"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestMigCrashAtEachStep kills the plugin (a hook that stops the prepare
// dead, with no rollback) at each step of creating MIG partitions. The
// restarted plugin must roll the claim back completely (no instance left,
// MIG mode off again), and the kubelet's retry must then prepare it in
// full. The claim asks for two partitions on one GPU, so that a crash on
// the second leaves the first created.
func TestMigCrashAtEachStep(t *testing.T) {
	errCrash := errors.New("simulated crash")
	tests := []struct {
		name  string
		hooks func(once func() error) nodestate.Hooks
		// afterCrash is what the hardware holds right after the crash,
		// before the restart: proof that the crash point was reached.
		afterCrash []string
	}{
		{"after MIG mode enabled", func(once func() error) nodestate.Hooks {
			return nodestate.Hooks{AfterMigModeEnabled: func(string, string) error { return once() }}
		}, []string{"gpu-7:mig-on"}},
		{"after the first GPU instance is created", func(once func() error) nodestate.Hooks {
			return nodestate.Hooks{AfterGPUInstanceCreated: func(string, string) error { return once() }}
		}, []string{"gpu-7:4g.40gb@0", "gpu-7:mig-on"}},
		{"after the second compute instance is created", func(once func() error) nodestate.Hooks {
			n := 0
			return nodestate.Hooks{AfterComputeInstanceCreated: func(string, string) error {
				if n++; n == 2 {
					return once()
				}
				return nil
			}}
		}, []string{"gpu-7:2g.20gb@4", "gpu-7:4g.40gb@0", "gpu-7:mig-on"}},
		{"before PrepareCompleted is written", func(once func() error) nodestate.Hooks {
			return nodestate.Hooks{BeforePrepareCompleted: func(string) error { return once() }}
		}, []string{"gpu-7:2g.20gb@4", "gpu-7:4g.40gb@0", "gpu-7:mig-on"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var crashed atomic.Bool
			once := func() error {
				if crashed.CompareAndSwap(false, true) {
					return errCrash
				}
				return nil
			}
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Hooks: tc.hooks(once)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			applyClasses(ctx, t, c)
			claim, err := c.CreateClaim(ctx, migClaim("crashy", true, "4g.40gb", "2g.20gb"))
			if err != nil {
				t.Fatal(err)
			}
			if claim, err = c.Allocate(ctx, claim); err != nil {
				t.Fatal(err)
			}
			resp, err := c.NodePrepareResources(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			if r := resp.Claims[string(claim.UID)]; r == nil || !strings.Contains(r.Error, "simulated crash") {
				t.Fatalf("prepare = %+v, want the simulated crash", r)
			}
			if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, tc.afterCrash) {
				t.Fatalf("after the crash the hardware holds %v, want %v", got, tc.afterCrash)
			}
			if got := c.Driver.State().PreparedClaims()[string(claim.UID)]; got != checkpoint.PrepareStarted {
				t.Fatalf("checkpoint state %q, want PrepareStarted", got)
			}

			// The restart rolls back everything the crashed prepare did.
			c.Stop()
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			if n := len(c.Driver.State().PreparedClaims()); n != 0 {
				t.Fatalf("after restart %d claims recorded, want the half-prepared one rolled back", n)
			}
			if got := instancesOn(hardware(t, c)); len(got) != 0 {
				t.Fatalf("after restart the hardware holds %v, want nothing", got)
			}
			if admin := c.Driver.AdminInstances(); len(admin) != 0 {
				t.Errorf("the crashed claim's instances were taken for an admin's: %v", admin)
			}

			// The kubelet retries: the claim is prepared in full.
			resp, err = c.NodePrepareResources(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			if r := resp.Claims[string(claim.UID)]; r.Error != "" || len(r.Devices) != 2 {
				t.Fatalf("retry = %+v, want two devices", r)
			}
			if got, want := instancesOn(hardware(t, c)), expectedInstances(t, c, claim); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the retry the hardware holds %v, want %v", got, want)
			}
			if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if got := instancesOn(hardware(t, c)); len(got) != 0 {
				t.Errorf("after unprepare the hardware holds %v", got)
			}
		})
	}
}

// TestMigRebootRecreates: a reboot destroys every MIG instance while the
// checkpoint still holds the claim. The restarted plugin recreates the
// partition at the same placement and rewrites the CDI spec, so the
// kubelet can restart the pod's containers.
func TestMigRebootRecreates(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := runClaim(ctx, t, c, migClaim("survivor", false, "3g.40gb"))
	if err != nil {
		t.Fatal(err)
	}
	want := instancesOn(hardware(t, c))
	c.Stop()
	if err := nvmlfake.Reboot(c.Opts.FakeStateDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.Opts.CDIDir()); err != nil {
		t.Fatal(err)
	}
	if got := instancesOn(hardware(t, c)); reflect.DeepEqual(got, want) {
		t.Fatalf("the reboot left the instances: %v", got)
	}
	opts := c.Opts
	opts.BootID = "boot-2"
	c2, err := Start(ctx, opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if got := instancesOn(hardware(t, c2)); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the restart the hardware holds %v, want %v", got, want)
	}
	view, err := c2.Inject("ctr", res.Claims[0].Devices[0].CdiDeviceIds)
	if err != nil {
		t.Fatalf("the CDI spec was not rewritten: %v", err)
	}
	if got := view.FakeDevices(); len(got) != 1 || !strings.HasPrefix(got[0], "MIG-") {
		t.Errorf("after reboot the container sees %v, want one MIG device", got)
	}
	if err := c2.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	if got := instancesOn(hardware(t, c2)); len(got) != 0 {
		t.Errorf("after unprepare the hardware holds %v", got)
	}
}

// TestMigCrashDuringUnprepare: a plugin killed after destroying the first
// of a claim's two partitions finishes the unprepare at its next start
// (rather than recreating the partition), leaving nothing.
func TestMigCrashDuringUnprepare(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var crashed atomic.Bool
	hooks := nodestate.Hooks{AfterMigDeviceDestroyed: func(string, string) error {
		if crashed.CompareAndSwap(false, true) {
			return errors.New("simulated crash")
		}
		return nil
	}}
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Hooks: hooks}, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyClasses(ctx, t, c)
	res, err := runClaim(ctx, t, c, migClaim("going", true, "3g.40gb", "3g.40gb"))
	if err != nil {
		t.Fatal(err)
	}
	claim := res.Claims[0].Claim
	resp, err := c.NodeUnprepareResources(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Claims[string(claim.UID)]; r == nil || !strings.Contains(r.Error, "simulated crash") {
		t.Fatalf("unprepare = %+v, want the simulated crash", r)
	}
	if got := instancesOn(hardware(t, c)); len(got) != 2 {
		t.Fatalf("after the crash the hardware holds %v, want one partition and MIG mode on", got)
	}
	if got := c.Driver.State().PreparedClaims()[string(claim.UID)]; got != checkpoint.UnprepareStarted {
		t.Fatalf("checkpoint state %q, want UnprepareStarted", got)
	}
	c.Stop()
	if c, err = Start(ctx, c.Opts, c.Client); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("after restart the hardware holds %v, want nothing", got)
	}
	assertNothingPrepared(t, c)
	// The kubelet's retry of the unprepare succeeds.
	resp, err = c.NodeUnprepareResources(ctx, claim)
	if err != nil || resp.Claims[string(claim.UID)].Error != "" {
		t.Fatalf("retried unprepare: %v %+v", err, resp)
	}
}
