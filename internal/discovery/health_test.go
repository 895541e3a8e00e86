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

package discovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

func TestWatchHealth(t *testing.T) {
	dir := t.TempDir()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: "dgx-h100", NodeName: "n", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	defer s.Shutdown()
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	d0, _ := s.DeviceGetHandleByIndex(0)
	d0.SetMigMode(nvml.DEVICE_MIG_ENABLE)

	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan gpu.HealthEvent)
	done := make(chan error)
	go func() { done <- WatchHealth(ctx, s, node, HealthOptions{}, events) }()

	expect := func(uuid, reason string) {
		t.Helper()
		select {
		case ev := <-events:
			if ev.UUID != uuid || ev.Health != gpu.Unhealthy || !strings.Contains(ev.Reason, reason) {
				t.Fatalf("event %+v, want %s unhealthy with %q", ev, uuid, reason)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event for %s", uuid)
		}
	}
	// Registration happens in the goroutine; events logged before it are
	// not delivered, like NVML's. Inject until the first one arrives.
	inject := func(uuid string, xid uint64) {
		if err := nvmlfake.InjectXID(dir, uuid, xid); err != nil {
			t.Fatal(err)
		}
	}
	g2, g5 := node.GPUs[2].UUID, node.GPUs[5].UUID
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		inject(g2, 94)
		select {
		case ev := <-events:
			// An XID logged before the watch registered leaves its
			// recovery action, which the watch starts from.
			if ev.UUID == g2 && strings.Contains(ev.Reason, "before health monitoring started") {
				return false, nil
			}
			if ev.UUID != g2 || !strings.Contains(ev.Reason, "XID 94") {
				t.Fatalf("event %+v", ev)
			}
			return true, nil
		case <-time.After(200 * time.Millisecond):
			return false, nil
		}
	}); err != nil {
		t.Fatal("no event for XID 94")
	}
	inject(g2, 94) // no change: no event
	inject(g5, 13) // an application error: ignored
	inject(g5, 48)
	expect(g5, "XID 48: double-bit ECC error")
	inject(g2, 74) // a new reason is a change
	expect(g2, "XID 74")

	// An XID inside a MIG device marks the GPU and names the instance.
	gi, _ := d0.CreateGpuInstance(must(d0.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_7_SLICE)))
	gi.CreateComputeInstance(mustCI(gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, 0)))
	mig, _ := d0.GetMigDeviceHandleByIndex(0)
	migUUID, _ := mig.GetUUID()
	inject(migUUID, 94)
	expect(node.GPUs[0].UUID, "(MIG GPU instance 0, compute instance 0)")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchHealth returned %v after cancel, want nil", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("WatchHealth did not return after cancel")
	}
}

func must(info nvml.GpuInstanceProfileInfo, _ nvml.Return) *nvml.GpuInstanceProfileInfo { return &info }

func mustCI(info nvml.ComputeInstanceProfileInfo, _ nvml.Return) *nvml.ComputeInstanceProfileInfo {
	return &info
}

func TestXIDReason(t *testing.T) {
	if got := xidReason(79); got != "XID 79: GPU has fallen off the bus" {
		t.Errorf("xidReason(79) = %q", got)
	}
	if got := xidReason(999); got != "XID 999" {
		t.Errorf("xidReason(999) = %q", got)
	}
	for _, x := range []uint64{13, 31, 43, 45, 68, 109} {
		if !slices.Contains(DefaultIgnoredXIDs, x) {
			t.Errorf("XID %d is not ignored", x)
		}
	}
}

// TestHealthRecovers: an unhealthy GPU is rechecked and reported healthy
// once the driver asks for no recovery action (after a GPU reset), and a
// lost GPU once it answers again (after a reboot); until then it stays
// unhealthy. XIDs in IgnoredXIDs change nothing.
//
// Every step waits for an event the watch must send, never for time: the
// watch registers before it reports what it starts from, XIDs arrive in
// the order they were logged, and the fake records a lost GPU before it
// reports XID 79 (as the hardware does), so no recheck can read it fit.
func TestHealthRecovers(t *testing.T) {
	dir := t.TempDir()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: "dgx-a100", NodeName: "n", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	defer s.Shutdown()
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	g1, g3 := node.GPUs[1].UUID, node.GPUs[3].UUID
	// An XID before the watch: the recovery action it left is where the
	// watch starts from, and that report comes after the registration.
	if err := nvmlfake.InjectXID(dir, g1, 48); err != nil {
		t.Fatal(err)
	}
	events, next := watchEvents(t, s, node, HealthOptions{IgnoredXIDs: []uint64{13, 92}, RecheckInterval: 50 * time.Millisecond})
	quiet := func(what string) {
		t.Helper()
		select {
		case ev := <-events:
			t.Fatalf("%s: unexpected event %+v", what, ev)
		default:
		}
	}
	if ev := next("the reset the driver asks for"); ev.UUID != g1 || ev.Health != gpu.Unhealthy || !strings.Contains(ev.Reason, "recovery action GPU reset") {
		t.Fatalf("at the start: %+v, want %s unhealthy, waiting for a reset", ev, g1)
	}

	// Events come after the watch has reported where it starts from: an
	// XID now is the next event.
	if err := nvmlfake.InjectXID(dir, g1, 31); err != nil {
		t.Fatal(err)
	}
	if ev := next("XID 31"); ev.UUID != g1 || ev.Health != gpu.Unhealthy || !strings.HasPrefix(ev.Reason, "XID 31") {
		t.Fatalf("after XID 31 on %s: %+v, want it unhealthy after XID 31", g1, ev)
	}
	// XID 92 is ignored: the XID logged after it is the next event.
	if err := nvmlfake.InjectXID(dir, g3, 92); err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.InjectXID(dir, g1, 48); err != nil {
		t.Fatal(err)
	}
	if ev := next("XID 48"); ev.UUID != g1 || ev.Health != gpu.Unhealthy || !strings.HasPrefix(ev.Reason, "XID 48") {
		t.Fatalf("after XID 92 (in IgnoredXIDs) on %s and XID 48 on %s: %+v, want %s unhealthy after XID 48", g3, g1, ev, g1)
	}

	if err := nvmlfake.ResetGPU(dir, g1); err != nil {
		t.Fatal(err)
	}
	if ev := next("recovery after a reset"); ev.UUID != g1 || ev.Health != gpu.Healthy || !strings.Contains(ev.Reason, "no recovery action") {
		t.Fatalf("after the reset: %+v, want %s healthy", ev, g1)
	}

	// A GPU that falls off the bus: a reset cannot reach it; a reboot
	// brings it back.
	if err := nvmlfake.LoseGPU(dir, g3); err != nil {
		t.Fatal(err)
	}
	if ev := next("lost"); ev.UUID != g3 || ev.Health != gpu.Unhealthy || !strings.Contains(ev.Reason, "XID 79") {
		t.Fatalf("lost: %+v", ev)
	}
	// What every recheck from now on reads: the GPU does not answer.
	if ok, why := recovered(s, g3, true); ok {
		t.Fatalf("on the XID 79 event, the recheck finds %s recovered: %s", g3, why)
	}
	if err := nvmlfake.ResetGPU(dir, g3); err == nil {
		t.Fatal("a lost GPU was reset")
	}
	quiet("a lost GPU stays unhealthy")
	if err := nvmlfake.Reboot(dir); err != nil {
		t.Fatal(err)
	}
	if ev := next("back after a reboot"); ev.UUID != g3 || ev.Health != gpu.Healthy {
		t.Fatalf("after the reboot: %+v, want %s healthy", ev, g3)
	}
	quiet("nothing else changes")
}

// TestCurrentHealth: what the driver still asks for after an XID, and a
// GPU that fell off the bus, are found without an event: a plugin that
// restarts before the reset sees them at once.
func TestCurrentHealth(t *testing.T) {
	s, node, dir := nodeWithStateDir(t, "dgx-a100")
	if got := CurrentHealth(s, node); len(got) != 0 {
		t.Fatalf("a fresh node: %v", got)
	}
	g1, g3, g5 := node.GPUs[1].UUID, node.GPUs[3].UUID, node.GPUs[5].UUID
	for uuid, xid := range map[string]uint64{g1: 48, g3: 79, g5: 13} {
		if err := nvmlfake.InjectXID(dir, uuid, xid); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, ev := range CurrentHealth(s, node) {
		if ev.Health != gpu.Unhealthy {
			t.Errorf("%+v", ev)
		}
		got[ev.UUID] = ev.Reason
	}
	if !strings.Contains(got[g1], "recovery action GPU reset") || !strings.Contains(got[g3], "ERROR_GPU_IS_LOST") || len(got) != 2 {
		t.Errorf("current health %v, want %s waiting for a reset and %s lost (XID 79), and %s (an application's XID) fit", got, g1, g3, g5)
	}
	if err := nvmlfake.ResetGPU(dir, g1); err != nil {
		t.Fatal(err)
	}
	if got := CurrentHealth(s, node); len(got) != 1 || got[0].UUID != g3 {
		t.Errorf("after resetting %s: %v", g1, got)
	}
}

// TestWatchStartsFromCurrentHealth: a watch started after an XID (a
// plugin restarted before the GPU was reset) reports the GPU unhealthy at
// once, and healthy once it is reset.
func TestWatchStartsFromCurrentHealth(t *testing.T) {
	s, node, dir := nodeWithStateDir(t, "dgx-a100")
	g1 := node.GPUs[1].UUID
	if err := nvmlfake.InjectXID(dir, g1, 48); err != nil {
		t.Fatal(err)
	}
	_, next := watchEvents(t, s, node, HealthOptions{RecheckInterval: 50 * time.Millisecond})
	if ev := next("the XID from before the watch"); ev.UUID != g1 || ev.Health != gpu.Unhealthy {
		t.Fatalf("first event %+v, want %s unhealthy", ev, g1)
	}
	if err := nvmlfake.ResetGPU(dir, g1); err != nil {
		t.Fatal(err)
	}
	if ev := next("the recheck after the reset"); ev.UUID != g1 || ev.Health != gpu.Healthy {
		t.Fatalf("after the reset: %+v, want %s healthy", ev, g1)
	}
}

// nodeWithStateDir is a fake node whose state (XIDs, resets) a test
// changes through its state directory, and the GPUs discovered on it.
func nodeWithStateDir(t *testing.T, profile string) (*nvmlfake.Server, gpu.Node, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: profile, NodeName: "n", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	t.Cleanup(func() { s.Shutdown() })
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	return s, node, dir
}

// On a driver that delivers recovery-action events (R565 on; the fake's
// gb200-tray has R580), the driver's word decides: the reset's all-clear
// clears the GPU at once (the recheck is an hour away), an XID names the
// action it raised, and an XID after which the driver asks for nothing
// leaves the GPU healthy even when it is not in the ignore list.
func TestHealthByRecoveryActionEvents(t *testing.T) {
	s, node, dir := nodeWithStateDir(t, "gb200-tray")
	g0, g1, g2, g3 := node.GPUs[0].UUID, node.GPUs[1].UUID, node.GPUs[2].UUID, node.GPUs[3].UUID
	if err := nvmlfake.InjectXID(dir, g0, 48); err != nil {
		t.Fatal(err)
	}
	_, nextEvent := watchEvents(t, s, node, HealthOptions{IgnoredXIDs: []uint64{}, RecheckInterval: time.Hour})
	next := func(want gpu.HealthEvent, reason ...string) {
		t.Helper()
		ev := nextEvent(fmt.Sprintf("%s %s", want.UUID, want.Health))
		if ev.UUID != want.UUID || ev.Health != want.Health {
			t.Fatalf("event %+v, want %s %s", ev, want.UUID, want.Health)
		}
		for _, r := range reason {
			if !strings.Contains(ev.Reason, r) {
				t.Errorf("reason %q does not say %q", ev.Reason, r)
			}
		}
	}
	// Sent once the watch registered: the events below reach it.
	next(gpu.HealthEvent{UUID: g0, Health: gpu.Unhealthy}, "recovery action GPU reset")

	if err := nvmlfake.ResetGPU(dir, g0); err != nil {
		t.Fatal(err)
	}
	next(gpu.HealthEvent{UUID: g0, Health: gpu.Healthy}, "all-clear")

	if err := nvmlfake.InjectXID(dir, g1, 48); err != nil {
		t.Fatal(err)
	}
	next(gpu.HealthEvent{UUID: g1, Health: gpu.Unhealthy}, "XID 48", "recovery action GPU reset")

	// XID 13 is not ignored here, but the driver asks for nothing: the
	// next event is that of the XID 48 logged after it, on another GPU
	// (events are handled in order).
	if err := nvmlfake.InjectXID(dir, g2, 13); err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.InjectXID(dir, g3, 48); err != nil {
		t.Fatal(err)
	}
	next(gpu.HealthEvent{UUID: g3, Health: gpu.Unhealthy}, "XID 48")
}

// A driver before R565 (the fake's dgx-h100 has R550) has no
// recovery-action events: a reset is noticed by the recheck only, and an
// XID outside the ignore list taints whatever the action.
func TestHealthWithoutRecoveryActionEvents(t *testing.T) {
	s, node, dir := nodeWithStateDir(t, "dgx-h100")
	g0, g1 := node.GPUs[0].UUID, node.GPUs[1].UUID
	if err := nvmlfake.InjectXID(dir, g0, 48); err != nil {
		t.Fatal(err)
	}
	_, next := watchEvents(t, s, node, HealthOptions{IgnoredXIDs: []uint64{}, RecheckInterval: time.Hour})
	if ev := next("the XID from before the watch"); ev.UUID != g0 || ev.Health != gpu.Unhealthy {
		t.Fatalf("event %+v, want %s unhealthy", ev, g0)
	}
	if err := nvmlfake.ResetGPU(dir, g0); err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.InjectXID(dir, g1, 13); err != nil {
		t.Fatal(err)
	}
	if ev := next("XID 13"); ev.UUID != g1 || ev.Health != gpu.Unhealthy || ev.Reason != "XID 13" {
		t.Fatalf("event %+v, want %s unhealthy by XID 13 (and no all-clear for %s before the recheck)", ev, g1, g0)
	}
}

// watchEvents runs WatchHealth on node until the test ends. It returns the
// events and a function that waits for the next one, failing the test
// after 5 s with what was awaited.
func watchEvents(t *testing.T, lib *nvmlfake.Server, node gpu.Node, opts HealthOptions) (<-chan gpu.HealthEvent, func(what string) gpu.HealthEvent) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	events := make(chan gpu.HealthEvent, 16)
	go func() { _ = WatchHealth(ctx, lib, node, opts, events) }()
	next := func(what string) gpu.HealthEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(5 * time.Second):
			t.Fatalf("no event: %s", what)
		}
		return gpu.HealthEvent{}
	}
	return events, next
}
