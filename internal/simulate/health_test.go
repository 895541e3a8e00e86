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
	"sort"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestXIDTaintsDevice: a critical XID on one GPU taints exactly that
// device in the ResourceSlices, reports it Unhealthy to the kubelet, and
// the scheduler stops picking it: one API write where the GPU's MIG
// placements are not published (an A100 with MIG off; an H100 that is not
// the spare). Where they are (the spare), they are tainted with it, and
// the next GPU becomes the spare: four slices change (the counter sets
// gain the next spare's), one write each, and the pool keeps its
// generation.
func TestXIDTaintsDevice(t *testing.T) {
	t.Run("whole GPUs only", func(t *testing.T) { testXIDTaintsDevice(t, "dgx-a100", 3, 1) })
	t.Run("placements not published", func(t *testing.T) { testXIDTaintsDevice(t, "dgx-h100", 3, 1) })
	t.Run("the spare", func(t *testing.T) { testXIDTaintsDevice(t, "dgx-h100", 7, 4) })
}

func testXIDTaintsDevice(t *testing.T, profile string, gpuIndex, wantWrites int) {
	ctx, c := startCluster(t, profile)
	published, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitPublished(t, c)
	sick := c.Driver.Node().GPUs[gpuIndex]
	generation := published[0].Spec.Pool.Generation
	placements := map[string]bool{}
	for _, s := range published {
		for _, d := range s.Spec.Devices {
			if strings.HasPrefix(d.Name, sick.DeviceName()+"-mig-") {
				placements[d.Name] = true
			}
		}
	}

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
	// The fake records the GPU lost before it reports XID 79, as the
	// hardware does, so the plugin's recheck never clears the taint: wait
	// for what the test asserts (the taints and the writes that carry
	// them), then check it.
	want := []string{sick.DeviceName()}
	for name := range placements {
		want = append(want, name)
	}
	sort.Strings(want)
	var tainted []string
	writes := 0
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		tainted = taintedDevices(ctx, t, c)
		sort.Strings(tainted)
		writes = countWrites(c.Client.Actions()) - before
		return reflect.DeepEqual(tainted, want) && writes >= wantWrites, nil
	}); err != nil {
		t.Fatalf("tainted devices %v after %d ResourceSlice writes, want %v after %d", tainted, writes, want, wantWrites)
	}
	if got := countWrites(c.Client.Actions()) - before; got != wantWrites {
		t.Errorf("one GPU's health change issued %d ResourceSlice writes, want %d", got, wantWrites)
	}
	after, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := after[0].Spec.Pool.Generation; g != generation || len(after) != len(published) {
		t.Errorf("pool generation %d → %d, %d → %d slices; want neither to change", generation, g, len(published), len(after))
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
