package simulate

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// TestXIDTaintsDevice: a critical XID on one GPU taints exactly that device
// in the ResourceSlices, reports it Unhealthy to the kubelet, and the
// scheduler stops picking it. On a node without MIG placements (an A100
// with MIG off) that is one API write. Where the GPU's MIG placements are
// published too (H100), they are tainted with it: two slices change, so
// the ResourceSlice controller starts a new pool generation and rewrites
// every slice of the node once.
func TestXIDTaintsDevice(t *testing.T) {
	t.Run("whole GPUs only", func(t *testing.T) { testXIDTaintsDevice(t, "dgx-a100") })
	t.Run("with MIG placements", func(t *testing.T) { testXIDTaintsDevice(t, "dgx-h100") })
}

func testXIDTaintsDevice(t *testing.T, profile string) {
	ctx, c := startCluster(t, profile)
	if _, err := c.Slices(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	sick := c.Driver.Node().GPUs[3]

	reports := make(chan kubeletplugin.DeviceHealthReport, 16)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Driver.WatchHealthStatus(watchCtx, reports) }()
	<-reports // the initial, all-healthy report

	before := countWrites(c.Client.Actions())
	if err := nvmlfake.InjectXID(c.Opts.FakeStateDir(), sick.UUID, 79); err != nil {
		t.Fatal(err)
	}

	deadline := time.After(20 * time.Second)
	for unhealthy := false; !unhealthy; {
		select {
		case r := <-reports:
			for _, d := range r.Devices {
				if d.DeviceName == sick.DeviceName() && d.Health == kubeletplugin.HealthStatusUnhealthy {
					unhealthy = true
				}
			}
		case <-deadline:
			t.Fatal("the kubelet was never told the GPU is unhealthy")
		}
	}
	var tainted []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		tainted = taintedDevices(ctx, t, c)
		if len(tainted) > 0 {
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	tainted = taintedDevices(ctx, t, c)
	want := []string{sick.DeviceName()}
	if sick.MIG != nil && sick.MigCapable && !sick.MIG.ModeChangeNeedsReset {
		for _, p := range sick.MIG.Profiles {
			for _, pl := range p.Placements {
				want = append(want, gpu.MigDeviceName(sick.Minor, p.Name, pl.Start))
			}
		}
	}
	sort.Strings(tainted)
	sort.Strings(want)
	if !reflect.DeepEqual(tainted, want) {
		t.Fatalf("tainted devices %v, want %v", tainted, want)
	}
	wantWrites := 1
	if len(want) > 1 {
		slices, _ := c.Slices(ctx)
		wantWrites = len(slices)
	}
	if got := countWrites(c.Client.Actions()) - before; got != wantWrites {
		t.Errorf("one GPU's health change issued %d ResourceSlice writes, want %d", got, wantWrites)
	}

	// The scheduler no longer hands out the tainted GPU: 7 fit, 8 do not.
	res, err := createAndRun(ctx, t, c, gpuClaim("seven", 7, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range allocatedDevices(res) {
		if d == sick.DeviceName() {
			t.Errorf("allocator picked the tainted %s", d)
		}
	}
}

func taintedDevices(ctx context.Context, t *testing.T, c *Cluster) []string {
	t.Helper()
	slices, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			for _, taint := range d.Taints {
				if taint.Key == slicebuilder.UnhealthyTaintKey(c.Opts.DriverName) && taint.Effect == resourceapi.DeviceTaintEffectNoSchedule {
					out = append(out, d.Name)
				}
			}
		}
	}
	return out
}
