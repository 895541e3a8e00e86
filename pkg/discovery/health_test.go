package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
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
	go func() { done <- WatchHealth(ctx, s, node, events) }()

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
	deadline := time.Now().Add(5 * time.Second)
	for first := false; !first; {
		inject(g2, 79)
		select {
		case ev := <-events:
			if ev.UUID != g2 || !strings.Contains(ev.Reason, "XID 79: GPU has fallen off the bus") {
				t.Fatalf("event %+v", ev)
			}
			first = true
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no event for XID 79")
			}
		}
	}
	inject(g2, 79) // no change: no event
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
		if !applicationXIDs[x] {
			t.Errorf("XID %d is not ignored", x)
		}
	}
}
