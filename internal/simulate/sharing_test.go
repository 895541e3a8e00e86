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
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/plugin"
)

// TestTimeSlicingAppliedAndRestored: a claim that asks for the Long
// interval gets its GPU's time slice set for as long as it is prepared;
// the GPU is back at the default once it goes, and other GPUs are never
// touched.
func TestTimeSlicingAppliedAndRestored(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, withConfig(gpuClaim("long", 1, ""),
		`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+tsLong+`}`))
	if err != nil {
		t.Fatal(err)
	}
	uuid := uuidOf(t, c, onlyDevice(t, res))
	if got := policyOf(t, c, uuid); got.timeSlice != 3 || got.computeMode != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("GPU of the time-sliced claim: %s, want time slice 3 (long), default compute mode", describe(got))
	}
	for _, g := range c.Driver.Node().GPUs {
		if g.UUID != uuid && policyOf(t, c, g.UUID).timeSlice != 0 {
			t.Errorf("GPU %s that no claim asked for has a time slice set", g.DeviceName())
		}
	}
	stopPod(ctx, t, c, res)
	if got := policyOf(t, c, uuid); got.timeSlice != 0 {
		t.Errorf("time slice after the claim is gone: %d, want the default 0", got.timeSlice)
	}
	if ts := c.Driver.State().TimeSlices(); len(ts) != 0 {
		t.Errorf("checkpoint still records time slices %v", ts)
	}
}

// TestConflictingIntervalsRefused: claims that share a GPU (consumable
// capacity) must ask for the same interval; the second that asks for
// another fails with a message naming the claim that holds the GPU, and
// nothing changes. A claim without sharing does not care. The interval
// stays until the last claim that asked for it goes.
func TestConflictingIntervalsRefused(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, shareClaim("ts-long-a", "10Gi", "", tsLong))
	if err != nil {
		t.Fatal(err)
	}
	gpu0 := onlyDevice(t, a)
	uuid := uuidOf(t, c, gpu0)

	_, err = createAndRun(ctx, t, c, shareClaim("ts-short", "10Gi", "", tsShort))
	if err == nil {
		t.Fatal("a claim asking for the Short interval on a GPU set to Long was prepared")
	}
	for _, want := range []string{"default/ts-short", gpu0, "is shared with ResourceClaim default/ts-long-a", "time-slice interval to Long", "asks for Short"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := policyOf(t, c, uuid).timeSlice; got != 3 {
		t.Errorf("the refused claim changed the time slice to %d", got)
	}

	b, err := createAndRun(ctx, t, c, shareClaim("ts-long-b", "10Gi", "", tsLong))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := createAndRun(ctx, t, c, shareClaim("no-sharing", "10Gi", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*PodResult{b, plain} {
		if d := onlyDevice(t, r); d != gpu0 {
			t.Fatalf("%s got %s, want a share of %s", r.Pod, d, gpu0)
		}
	}
	stopPod(ctx, t, c, a)
	if got := policyOf(t, c, uuid).timeSlice; got != 3 {
		t.Errorf("time slice %d after one of two Long claims went, want 3", got)
	}
	stopPod(ctx, t, c, b)
	if got := policyOf(t, c, uuid).timeSlice; got != 0 {
		t.Errorf("time slice %d after both Long claims went, want the default", got)
	}
	stopPod(ctx, t, c, plain)
}

// TestMPSOneDaemonPerDevice: two claims sharing a GPU through MPS get one
// control daemon, each its own limits, both the same pipe directory. The
// GPU is in exclusive-process mode while the daemon runs. Releasing one
// claim keeps the daemon; releasing both stops it, removes its
// directories and restores the compute mode.
func TestMPSOneDaemonPerDevice(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, shareClaim("mps-a", "20Gi", "", mpsSharing))
	if err != nil {
		t.Fatal(err)
	}
	b, err := createAndRun(ctx, t, c, shareClaim("mps-b", "30Gi", "66", `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":80}}`))
	if err != nil {
		t.Fatal(err)
	}
	dev := onlyDevice(t, a)
	if d := onlyDevice(t, b); d != dev {
		t.Fatalf("the claims got %s and %s, want shares of one GPU", dev, d)
	}
	if got := daemons(t, c); !slices.Equal(got, []string{dev}) {
		t.Fatalf("MPS daemons %v, want one for %s", got, dev)
	}
	assertDaemonMetric(t, c, 1, 0)
	uuid := uuidOf(t, c, dev)
	if got := policyOf(t, c, uuid).computeMode; got != nvml.COMPUTEMODE_EXCLUSIVE_PROCESS {
		t.Errorf("compute mode %d with MPS, want EXCLUSIVE_PROCESS", got)
	}
	ca, cb := a.Containers[0], b.Containers[0]
	// Each claim's own limits: its memory share (and for b its
	// multiprocessor share, 66 of 132, below its configured 80%).
	for _, tc := range []struct {
		ctr             Container
		pinned, threads string
	}{{ca, "0=20480M", ""}, {cb, "0=30720M", "50"}} {
		if got := mustEnv(t, tc.ctr, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); got != tc.pinned {
			t.Errorf("%s: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s, want %s", tc.ctr.Name, got, tc.pinned)
		}
		got, _ := tc.ctr.EnvValue("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
		if got != tc.threads {
			t.Errorf("%s: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%q, want %q", tc.ctr.Name, got, tc.threads)
		}
		if got := mustEnv(t, tc.ctr, "CUDA_MPS_PIPE_DIRECTORY"); got != "/tmp/nvidia-mps" {
			t.Errorf("%s: CUDA_MPS_PIPE_DIRECTORY=%s", tc.ctr.Name, got)
		}
		mustEnv(t, tc.ctr, "CUDA_MPS_LOG_DIRECTORY")
	}
	pipe := mountOf(ca, "/tmp/nvidia-mps")
	if pipe == "" || pipe != mountOf(cb, "/tmp/nvidia-mps") || mountOf(ca, "/dev/shm") != mountOf(cb, "/dev/shm") {
		t.Errorf("the two clients do not share the daemon's directories: %v / %v", ca.Mounts, cb.Mounts)
	}
	if !exists(filepath.Join(pipe, "control")) {
		t.Errorf("no control socket in the mounted pipe directory %s", pipe)
	}
	pid := daemonPID(c, dev)

	// One more claim without MPS cannot join the MPS GPU.
	_, err = createAndRun(ctx, t, c, shareClaim("not-mps", "10Gi", "", ""))
	if err == nil || !strings.Contains(err.Error(), "shares the device through MPS, so every claim on it must use MPS too") {
		t.Errorf("a claim without MPS on the MPS GPU: %v", err)
	}

	stopPod(ctx, t, c, a)
	if got := daemons(t, c); !slices.Equal(got, []string{dev}) || daemonPID(c, dev) != pid {
		t.Errorf("after one of two claims went: daemons %v, pid %d (was %d); want the same daemon", got, daemonPID(c, dev), pid)
	}
	assertDaemonMetric(t, c, 1, 0)
	stopPod(ctx, t, c, b)
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemons %v after both claims went", got)
	}
	if exists(filepath.Dir(pipe)) {
		t.Errorf("the daemon's directory %s is left", filepath.Dir(pipe))
	}
	if got := policyOf(t, c, uuid).computeMode; got != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("compute mode %d after the daemon stopped, want it restored to DEFAULT", got)
	}
	if n := c.Driver.MPSDaemons(); n != 0 {
		t.Errorf("the plugin counts %d daemons", n)
	}
	assertDaemonMetric(t, c, 0, 0)
}

// assertDaemonMetric checks gpudra_plugin_mps_daemons as scraped.
func assertDaemonMetric(t *testing.T, c *Cluster, running, unhealthy float64) {
	t.Helper()
	s := gpudratest.Gather(t, c.Driver.Registry())
	for state, want := range map[string]float64{"running": running, "unhealthy": unhealthy} {
		if got, ok := s.Value(t, plugin.MetricMPSDaemons.Name, "state="+state); !ok || got != want {
			t.Errorf("%s{state=%s} = %v (exported: %v), want %v", plugin.MetricMPSDaemons.Name, state, got, ok, want)
		}
	}
}

// TestMPSSurvivesRestartAndUpgrade: with both clients running, the plugin
// restarts, and then a new plugin starts next to the old one before the
// old one stops (a rolling upgrade): every time the same daemon process
// is adopted, no second one starts, and the clients' CDI specs do not
// change.
func TestMPSSurvivesRestartAndUpgrade(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, shareClaim("mps-a", "20Gi", "", mpsSharing))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createAndRun(ctx, t, c, shareClaim("mps-b", "20Gi", "", mpsSharing)); err != nil {
		t.Fatal(err)
	}
	dev := onlyDevice(t, a)
	pid := daemonPID(c, dev)
	specs := specContents(t, c)

	c2, err := c.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Stop)
	if got := daemons(t, c2); !slices.Equal(got, []string{dev}) || daemonPID(c2, dev) != pid {
		t.Fatalf("after a restart: daemons %v, pid %d; want the adopted pid %d", got, daemonPID(c2, dev), pid)
	}

	// The rolling upgrade: a second node state over the same node,
	// reconciled while the first plugin still serves.
	next := secondState(ctx, t, c2)
	if _, err := next.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := daemons(t, c2); !slices.Equal(got, []string{dev}) || daemonPID(c2, dev) != pid {
		t.Fatalf("with the new plugin beside the old: daemons %v, pid %d; want %d", got, daemonPID(c2, dev), pid)
	}
	c2.Stop() // the old plugin goes
	c3, err := Start(ctx, c2.Opts, c2.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c3.Stop(); stopAllDaemons(t, c3) })
	if got := daemons(t, c3); !slices.Equal(got, []string{dev}) || daemonPID(c3, dev) != pid {
		t.Fatalf("after the upgrade: daemons %v, pid %d; want %d", got, daemonPID(c3, dev), pid)
	}
	if got := specContents(t, c3); !reflect.DeepEqual(got, specs) {
		t.Errorf("the clients' CDI specs changed across restart and upgrade")
	}
	if n := c3.Driver.MPSDaemons(); n != 1 {
		t.Errorf("the plugin counts %d daemons, want 1", n)
	}
}

// TestMPSDaemonKilledIsRestarted: a daemon killed from outside is noticed
// at the next check, its device is reported unhealthy to the kubelet, a
// new daemon is started, and the device is healthy again.
func TestMPSDaemonKilledIsRestarted(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, shareClaim("mps-a", "20Gi", "", mpsSharing))
	if err != nil {
		t.Fatal(err)
	}
	dev := onlyDevice(t, a)
	reports := make(chan kubeletplugin.DeviceHealthReport, 64)
	go func() { _ = c.Driver.WatchHealthStatus(ctx, reports) }()
	<-reports

	pid := daemonPID(c, dev)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	saw := map[kubeletplugin.HealthStatus]bool{}
	deadline := time.After(30 * time.Second)
	for !(saw[kubeletplugin.HealthStatusUnhealthy] && saw[kubeletplugin.HealthStatusHealthy]) {
		select {
		case r := <-reports:
			for _, d := range r.Devices {
				if d.DeviceName != dev {
					continue
				}
				if d.Health == kubeletplugin.HealthStatusUnhealthy {
					saw[d.Health] = true
					if !strings.Contains(d.Message, "MPS control daemon not answering") {
						t.Errorf("unhealthy message %q", d.Message)
					}
				} else if saw[kubeletplugin.HealthStatusUnhealthy] {
					saw[d.Health] = true
				}
			}
		case <-deadline:
			t.Fatalf("health of %s seen: %v; want unhealthy, then healthy again", dev, saw)
		}
	}
	if np := daemonPID(c, dev); np == 0 || np == pid {
		t.Errorf("daemon pid %d after the restart (killed %d)", np, pid)
	}
	if got := daemons(t, c); !slices.Equal(got, []string{dev}) {
		t.Errorf("daemons %v after the restart", got)
	}
	assertDaemonMetric(t, c, 1, 0)
}

// TestMPSCrashAtEachStep: the plugin dies after each step of starting and
// stopping a daemon. The next start leaves no daemon, no directory and no
// changed compute mode behind for a claim that did not finish preparing,
// and finishes the stop of one that was being unprepared; the kubelet's
// retry then works.
func TestMPSCrashAtEachStep(t *testing.T) {
	errCrash := errors.New("simulated crash")
	starting := []string{nodestate.StepDaemonRecorded, nodestate.StepComputeModeSet, nodestate.StepDaemonLaunched, nodestate.StepDaemonReady}
	stopping := []string{nodestate.StepDaemonStopping, nodestate.StepDaemonStopped, nodestate.StepComputeModeRestored}
	for _, step := range append(starting, stopping...) {
		t.Run(step, func(t *testing.T) {
			armed := slices.Contains(starting, step)
			hooks := nodestate.Hooks{AfterSharingStep: func(_ string, s string) error {
				if armed && s == step {
					armed = false
					return errCrash
				}
				return nil
			}}
			ctx, c := startHookedSharedCluster(t, hooks)
			claim, err := c.CreateClaim(ctx, shareClaim("crashy", "20Gi", "", mpsSharing))
			if err != nil {
				t.Fatal(err)
			}
			if claim, err = c.Allocate(ctx, claim); err != nil {
				t.Fatal(err)
			}
			dev := claim.Status.Allocation.Devices.Results[0].Device
			uuid := uuidOf(t, c, dev)
			resp, err := c.NodePrepareResources(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			if r := resp.Claims[string(claim.UID)]; slices.Contains(starting, step) != strings.Contains(r.Error, "simulated crash") {
				t.Fatalf("prepare = %+v", r)
			}
			if !slices.Contains(starting, step) {
				armed = true
				resp, err := c.NodeUnprepareResources(ctx, claim)
				if err != nil {
					t.Fatal(err)
				}
				if r := resp.Claims[string(claim.UID)]; !strings.Contains(r.Error, "simulated crash") {
					t.Fatalf("unprepare = %+v, want the simulated crash", r)
				}
			}

			c.Stop()
			c.Opts.Hooks = nodestate.Hooks{}
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Stop(); stopAllDaemons(t, c) })
			if got := daemons(t, c); len(got) != 0 {
				t.Errorf("daemons %v left after the restart", got)
			}
			if d := c.Driver.State().MPSDaemons(); len(d) != 0 {
				t.Errorf("checkpoint still records daemons %v", d)
			}
			if exists(filepath.Join(c.Opts.MPSDir(), dev)) {
				t.Errorf("the daemon's directory is left")
			}
			if got := policyOf(t, c, uuid).computeMode; got != nvml.COMPUTEMODE_DEFAULT {
				t.Errorf("compute mode %d left, want DEFAULT", got)
			}
			if n := len(c.Driver.State().PreparedClaims()); n != 0 {
				t.Errorf("%d claims recorded after the restart", n)
			}

			// The kubelet retries the prepare (or, for a claim that was
			// being unprepared, the unprepare, which finds nothing left).
			if slices.Contains(starting, step) {
				resp, err = c.NodePrepareResources(ctx, claim)
				if err != nil || resp.Claims[string(claim.UID)].Error != "" {
					t.Fatalf("retry = %+v, %v", resp, err)
				}
				if got := daemons(t, c); !slices.Equal(got, []string{dev}) {
					t.Errorf("daemons %v after the retry", got)
				}
			}
			if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if got := daemons(t, c); len(got) != 0 {
				t.Errorf("daemons %v after the final unprepare", got)
			}
		})
	}
}

// TestTimeSliceCrashAtEachStep: the same for the time slice.
func TestTimeSliceCrashAtEachStep(t *testing.T) {
	errCrash := errors.New("simulated crash")
	for _, step := range []string{nodestate.StepTimeSliceRecorded, nodestate.StepTimeSliceSet, nodestate.StepTimeSliceRestored} {
		t.Run(step, func(t *testing.T) {
			preparing := step != nodestate.StepTimeSliceRestored
			armed := preparing
			_, ctx := ktestingContext(t)
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Hooks: nodestate.Hooks{AfterSharingStep: func(_ string, s string) error {
				if armed && s == step {
					armed = false
					return errCrash
				}
				return nil
			}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			applyClasses(ctx, t, c)
			claim, err := c.CreateClaim(ctx, withConfig(gpuClaim("crashy", 1, ""), `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+tsLong+`}`))
			if err != nil {
				t.Fatal(err)
			}
			if claim, err = c.Allocate(ctx, claim); err != nil {
				t.Fatal(err)
			}
			uuid := uuidOf(t, c, claim.Status.Allocation.Devices.Results[0].Device)
			if _, err := c.NodePrepareResources(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if !preparing {
				armed = true
				if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
					t.Fatal(err)
				}
			}
			c.Stop()
			c.Opts.Hooks = nodestate.Hooks{}
			if c, err = Start(ctx, c.Opts, c.Client); err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			if got := policyOf(t, c, uuid).timeSlice; got != 0 {
				t.Errorf("time slice %d left after the restart", got)
			}
			if ts := c.Driver.State().TimeSlices(); len(ts) != 0 {
				t.Errorf("checkpoint records time slices %v", ts)
			}
		})
	}
}

// TestMPSOnMIG: MPS on a MIG partition: a daemon for the MIG device,
// serving its MIG UUID, with the GPU's compute mode left at the default
// (MIG GPUs refuse any other); it goes with the claim, and so does the
// partition.
func TestMPSOnMIG(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	claim := migClaim("mig-mps", false, "1g.10gb")
	claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, mpsConfig("MigConfig", claim.Spec.Devices.Requests[0].Name))
	res, err := runClaim(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	dev := onlyDevice(t, res)
	if got := daemons(t, c); !slices.Equal(got, []string{dev}) {
		t.Fatalf("daemons %v, want one for the MIG device %s", got, dev)
	}
	migEnv := envWithPrefix(res.Containers[0], "GPUDRA_FAKE_MIG_")
	if len(migEnv) != 1 {
		t.Fatalf("the container sees MIG devices %v, want one", migEnv)
	}
	_, migUUID, _ := strings.Cut(migEnv[0], "=")
	log, err := os.ReadFile(filepath.Join(c.Opts.MPSDir(), dev, "log", "control.log"))
	if err != nil || !strings.Contains(string(log), migUUID) {
		t.Errorf("the daemon does not serve %s: %v\n%s", migUUID, err, log)
	}
	md, _ := c.Driver.Node().MigDeviceByName(dev)
	if got := policyOf(t, c, md.Parent.UUID).computeMode; got != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("compute mode %d on a MIG GPU", got)
	}
	stopPod(ctx, t, c, res)
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemons %v after the claim went", got)
	}
	if got := instancesOn(hardware(t, c)); len(got) != 0 {
		t.Errorf("MIG left: %v", got)
	}
}

// TestMIGMPSAndConsumableCapacityTogether: on one node, MPS shares of a
// whole GPU, an MPS MIG partition and an exclusive GPU, all at once: the
// shared GPU takes no partitions, each MPS device has its own daemon.
func TestMIGMPSAndConsumableCapacityTogether(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	share, err := createAndRun(ctx, t, c, shareClaim("share", "20Gi", "", mpsSharing))
	if err != nil {
		t.Fatal(err)
	}
	mig := migClaim("mig", false, "1g.10gb")
	mig.Spec.Devices.Config = append(mig.Spec.Devices.Config, mpsConfig("MigConfig", mig.Spec.Devices.Requests[0].Name))
	migRes, err := runClaim(ctx, t, c, mig)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := createAndRun(ctx, t, c, shareClaim("whole", "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	shared, migDev, wholeDev := onlyDevice(t, share), onlyDevice(t, migRes), onlyDevice(t, whole)
	md, _ := c.Driver.Node().MigDeviceByName(migDev)
	if md.Parent.DeviceName() == shared || wholeDev == shared || wholeDev == md.Parent.DeviceName() {
		t.Errorf("devices overlap: share of %s, MIG %s on %s, exclusive %s", shared, migDev, md.Parent.DeviceName(), wholeDev)
	}
	if got, want := daemons(t, c), []string{shared, migDev}; !reflect.DeepEqual(sorted(got), sorted(want)) {
		t.Errorf("daemons %v, want %v", got, want)
	}
	if got := policyOf(t, c, uuidOf(t, c, wholeDev)).computeMode; got != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("the exclusive GPU's compute mode is %d", got)
	}
	for _, r := range []*PodResult{share, migRes, whole} {
		stopPod(ctx, t, c, r)
	}
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemons %v left", got)
	}
}

// TestConsumableCapacityPacking: claims are packed onto one GPU up to its
// memory; the next goes to another GPU, or, confined to that GPU, stays
// unschedulable. A claim without a capacity request takes a whole GPU.
func TestConsumableCapacityPacking(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "MPS")
	onGPU0 := "device.attributes['gpu.gpudra.io'].minor == 0"
	var devs []string
	for _, name := range []string{"half-a", "half-b"} {
		claim := shareClaim(name, "39Gi", "", "")
		claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors(onGPU0)
		res, err := createAndRun(ctx, t, c, claim)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, onlyDevice(t, res))
		if got := mustEnv(t, res.Containers[0], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); got != "0=39936M" {
			t.Errorf("%s: pinned memory limit %s, want its 39Gi share", name, got)
		}
	}
	if devs[0] != "gpu-0" || devs[1] != "gpu-0" {
		t.Fatalf("two 39Gi claims got %v, want both on gpu-0", devs)
	}
	full := shareClaim("full", "39Gi", "", "")
	full.Spec.Devices.Requests[0].Exactly.Selectors = selectors(onGPU0)
	if _, err := createAndRun(ctx, t, c, full); !errors.Is(err, ErrUnschedulable) {
		t.Errorf("a third 39Gi claim on gpu-0 (81559 MiB): %v, want unschedulable", err)
	}
	elsewhere, err := createAndRun(ctx, t, c, shareClaim("elsewhere", "39Gi", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if d := onlyDevice(t, elsewhere); d == "gpu-0" {
		t.Errorf("a 39Gi claim went to the full gpu-0")
	}
	whole, err := createAndRun(ctx, t, c, shareClaim("whole", "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := whole.Claims[0].Claim.Status.Allocation.Devices.Results[0].ConsumedCapacity["memory"]
	if g, _ := c.Driver.Node().GPUByDeviceName(onlyDevice(t, whole)); got.Value() != int64(g.MemoryBytes) {
		t.Errorf("a claim without a capacity request consumed %s of memory, want all %d bytes of its GPU", got.String(), g.MemoryBytes)
	}
	if pipe := mountOf(whole.Containers[0], "/tmp/nvidia-mps"); pipe != "" {
		t.Errorf("a claim of a whole GPU got MPS from the pool's default: pipe directory %s", pipe)
	}
	// The node pool's MPS applies to shares that say nothing: the next
	// small one joins the MPS daemon of the GPU that has room.
	tiny, err := createAndRun(ctx, t, c, shareClaim("tiny", "1Mi", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustEnv(t, tiny.Containers[0], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); got != "0=1M" {
		t.Errorf("tiny share: pinned memory limit %s, want 0=1M", got)
	}
	if got := daemons(t, c); len(got) != 2 {
		t.Errorf("daemons %v, want one per shared GPU (gpu-0 and the one with room)", got)
	}
}

// TestConsumableCapacityFallback: an API server without
// DRAConsumableCapacity drops allowMultipleAllocations; the plugin notices,
// says so in its log and in an Event on the Node, and publishes exclusive
// GPUs, which still schedule, one claim each.
func TestConsumableCapacityFallback(t *testing.T) {
	_, ctx := ktestingContext(t)
	client := NewClientset()
	strip := dropFieldsReactor(func(s *resourceSliceSpec) {
		for i := range s.Devices {
			s.Devices[i].AllowMultipleAllocations = nil
			for name, capacity := range s.Devices[i].Capacity {
				capacity.RequestPolicy = nil
				s.Devices[i].Capacity[name] = capacity
			}
		}
	})
	client.PrependReactor("create", "resourceslices", strip)
	client.PrependReactor("update", "resourceslices", strip)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), ConsumableCapacity: true}, client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	applyClasses(ctx, t, c)
	// One 30 s bound for the fallback and its Node event together.
	within, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(within, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return !c.Driver.ConsumableCapacityActive(), nil
	}); err != nil {
		t.Fatal("the plugin never fell back to exclusive GPUs")
	}
	var event string
	_ = wait.PollUntilContextCancel(within, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		event = nodeEvent(ctx, t, c, "ConsumableCapacityUnavailable")
		return event != "", nil
	})
	if !strings.Contains(event, "DRAConsumableCapacity") {
		t.Errorf("Node event %q does not say which feature to enable", event)
	}
	waitPublished(t, c) // the controller settled on the new generation
	a, err := createAndRun(ctx, t, c, shareClaim("a", "20Gi", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := createAndRun(ctx, t, c, shareClaim("b", "20Gi", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if onlyDevice(t, a) == onlyDevice(t, b) {
		t.Errorf("two claims share %s without consumable capacity", onlyDevice(t, a))
	}
}

// TestSharedClaimMPS: one claim used by two pods is prepared once, with
// one daemon.
func TestSharedClaimMPS(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	claim := withConfig(gpuClaim("shared-mps", 1, ""), `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+mpsSharing+`}`)
	if _, err := c.CreateClaim(ctx, claim); err != nil {
		t.Fatal(err)
	}
	a, err := c.RunPod(ctx, podUsing("pod-a", "shared-mps"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.RunPod(ctx, podUsing("pod-b", "shared-mps"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAllDaemons(t, c) })
	if got := daemons(t, c); len(got) != 1 {
		t.Errorf("daemons %v, want one", got)
	}
	if mountOf(a.Containers[0], "/tmp/nvidia-mps") != mountOf(b.Containers[0], "/tmp/nvidia-mps") {
		t.Error("the two pods of one claim see different pipe directories")
	}
	if _, ok := a.Containers[0].EnvValue("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); ok {
		t.Error("a claim without limits or a capacity share got a pinned memory limit")
	}
	stopPod(ctx, t, c, a)
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemons %v after the claim was unprepared", got)
	}
}

// TestClassSharingWithClaimCapabilities: a DeviceClass fixes the MPS tier
// and a claim adds driver capabilities: both apply (configs merge field by
// field, the claim's over the class's).
func TestClassSharingWithClaimCapabilities(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	t.Cleanup(func() { stopAllDaemons(t, c) })
	class := mpsClass("mps-tier.example.com", `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":25}}`)
	if err := c.ApplyDeviceClass(ctx, class); err != nil {
		t.Fatal(err)
	}
	claim := withConfig(gpuClaim("tiered", 1, ""), `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","video"]}`)
	claim.Spec.Devices.Requests[0].Exactly.DeviceClassName = class.Name
	res, err := createAndRun(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	ctr := res.Containers[0]
	if got := mustEnv(t, ctr, "NVIDIA_DRIVER_CAPABILITIES"); got != "compute,video" {
		t.Errorf("capabilities %s, want the claim's", got)
	}
	if got := mustEnv(t, ctr, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"); got != "25" {
		t.Errorf("active thread percentage %s, want the class's 25", got)
	}
	stopPod(ctx, t, c, res)
}

// TestMPSOnOneDeviceOnly: a claim with MPS on two devices is refused
// before anything happens.
func TestMPSOnOneDeviceOnly(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	_, err := createAndRun(ctx, t, c, withConfig(gpuClaim("two-mps", 2, ""), `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+mpsSharing+`}`))
	if err == nil || !strings.Contains(err.Error(), "a claim may use MPS on one device only") {
		t.Fatalf("a claim with MPS on two GPUs: %v", err)
	}
	if got := daemons(t, c); len(got) != 0 {
		t.Errorf("daemons %v started for a refused claim", got)
	}
}
