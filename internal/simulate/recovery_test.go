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
	"reflect"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestHealthRecovers: an XID taints a GPU; once the driver asks for no
// recovery action any more (after a GPU reset) the taint goes without a
// plugin restart, in one write, and the slices are exactly what they were
// before the XID. The kubelet's health stream follows.
func TestHealthRecovers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: "dgx-a100", HealthRecheck: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	before, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitPublished(t, c)
	sick := c.Driver.Node().GPUs[2]
	reports := watchHealthStream(ctx, t, c)
	writes := countWrites(c.Client.Actions())

	// The XID: tainted, one write, unhealthy in the stream.
	if err := nvmlfake.InjectXID(c.Opts.FakeStateDir(), sick.UUID, 48); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the taint", func() bool { return slices.Equal(taintedDevices(ctx, t, c), []string{sick.DeviceName()}) })
	waitForHealth(t, reports, sick.DeviceName(), kubeletplugin.HealthStatusUnhealthy)
	time.Sleep(300 * time.Millisecond) // rechecks run: the driver still asks for a reset
	if got := taintedDevices(ctx, t, c); !slices.Equal(got, []string{sick.DeviceName()}) {
		t.Fatalf("before the reset: tainted %v", got)
	}
	if got := countWrites(c.Client.Actions()) - writes; got != 1 {
		t.Errorf("the XID cost %d writes, want 1", got)
	}

	// The GPU is reset: the taint goes, in one more write.
	if err := nvmlfake.ResetGPU(c.Opts.FakeStateDir(), sick.UUID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the taint to go", func() bool { return len(taintedDevices(ctx, t, c)) == 0 })
	waitForHealth(t, reports, sick.DeviceName(), kubeletplugin.HealthStatusHealthy)
	time.Sleep(300 * time.Millisecond)
	if got := countWrites(c.Client.Actions()) - writes; got != 2 {
		t.Errorf("taint and recovery cost %d writes, want 2", got)
	}
	after, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(devicesOf(before), devicesOf(after)) {
		t.Error("after recovery the slices' devices differ from before the XID")
	}
	registerLikeKubelet(ctx, t, c)
	if err := c.Driver.Ready(); err != nil {
		t.Errorf("not ready after recovery: %v", err)
	}
}

// TestMigDevicesInHealthStream: the kubelet is told the health of the MIG
// devices prepared on a GPU, not only of the GPU: a pod on a MIG partition
// sees it go unhealthy with its GPU.
func TestMigDevicesInHealthStream(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: "dgx-h100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	applyClasses(ctx, t, c)
	res, err := runClaim(ctx, t, c, migClaim("small", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	migDevice := allocatedDevices(res)[0]
	parent, ok := c.Driver.Node().MigDeviceByName(migDevice)
	if !ok {
		t.Fatalf("%s is not a MIG device of the node", migDevice)
	}
	reports := watchHealthStream(ctx, t, c)
	waitForHealth(t, reports, migDevice, kubeletplugin.HealthStatusHealthy)

	if err := nvmlfake.InjectXID(c.Opts.FakeStateDir(), parent.Parent.UUID, 95); err != nil {
		t.Fatal(err)
	}
	waitForHealth(t, reports, migDevice, kubeletplugin.HealthStatusUnhealthy)
}

// watchHealthStream is the kubelet's side of WatchHealthStatus.
func watchHealthStream(ctx context.Context, t *testing.T, c *Cluster) <-chan kubeletplugin.DeviceHealthReport {
	t.Helper()
	reports := make(chan kubeletplugin.DeviceHealthReport, 64)
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Driver.WatchHealthStatus(wctx, reports) }()
	return reports
}

// waitForHealth reads reports until one says the device has the health.
func waitForHealth(t *testing.T, reports <-chan kubeletplugin.DeviceHealthReport, device string, want kubeletplugin.HealthStatus) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-reports:
			for _, d := range r.Devices {
				if d.DeviceName == device && d.Health == want {
					return
				}
			}
		case <-deadline:
			t.Fatalf("the kubelet was never told %s is %s", device, want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

// waitPublished waits until the API server holds everything the plugin
// wants published (Driver.Published): the writes of the start-up sync are
// done, so writes counted from here are the test's own. A fixed pause in
// its place ends too early on a busy machine, and start-up writes are then
// counted against the test.
func waitPublished(t *testing.T, c *Cluster) {
	t.Helper()
	var why error
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		why = c.Driver.Published()
		return why == nil, nil
	})
	if err != nil {
		t.Fatalf("the plugin's slices were never all published: %v (%v)", err, why)
	}
}

// devicesOf lists every device of the slices, by name.
func devicesOf(sl []*resourceapi.ResourceSlice) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}
