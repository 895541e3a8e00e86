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
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// adminCreates makes, before the plugin starts, what an admin would with
// nvidia-smi: MIG mode on GPU index and a 3g.40gb instance (with its
// compute instance) at memory slices 4-7.
func adminCreates(t *testing.T, opts Options, index int) {
	t.Helper()
	opts.defaults()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: opts.Profile, NodeName: opts.NodeName, StateDir: opts.FakeStateDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	defer s.Shutdown()
	if err := nvmlfake.AdminMIG(s, index, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4, 4); err != nil {
		t.Fatal(err)
	}
}

// TestMigAdminInstances: an instance the plugin did not create is reported
// at start-up, never destroyed (not by unprepare, not by a restart), and
// neither its placement, nor any placement overlapping it, nor its whole
// GPU is published; what is left of the GPU still is, and fills up to the
// GPU's real capacity.
func TestMigAdminInstances(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	opts := Options{Dir: gpudratest.ShortTempDir(t)}
	adminCreates(t, opts, 1)
	c, err := Start(ctx, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Stop() }()
	applyClasses(ctx, t, c)
	g1 := c.Driver.Node().GPUs[1]

	admin := c.Driver.AdminInstances()
	if len(admin) != 1 || len(admin[g1.UUID]) != 1 || admin[g1.UUID][0].Placement.Start != 4 {
		t.Fatalf("admin instances %+v, want the 3g.40gb at 4 on GPU 1", admin)
	}
	published := publishedDevices(ctx, t, c)
	for _, name := range []string{"gpu-1", "gpu-1-mig-3g40gb-4", "gpu-1-mig-1g10gb-4", "gpu-1-mig-7g80gb-0"} {
		if published[name] {
			t.Errorf("%s is published though the admin's instance overlaps it", name)
		}
	}
	for _, name := range []string{"gpu-0", "gpu-1-mig-1g10gb-0", "gpu-1-mig-2g20gb-2", "gpu-1-mig-3g40gb-0", "gpu-1-mig-4g40gb-0"} {
		if !published[name] {
			t.Errorf("%s is not published", name)
		}
	}

	// The rest of GPU 1 (4 memory slices, 4 compute slices) is usable:
	// a 2g.20gb and two 1g.10gb fill it.
	onGPU1 := fmt.Sprintf("device.attributes['gpu.gpudra.io'].parentUUID == %q", g1.UUID)
	claim := migClaim("beside-admin", true, "2g.20gb", "1g.10gb", "1g.10gb")
	for i := range claim.Spec.Devices.Requests {
		claim.Spec.Devices.Requests[i].Exactly.Selectors = append(claim.Spec.Devices.Requests[i].Exactly.Selectors,
			resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: onGPU1}})
	}
	res, err := runClaim(ctx, t, c, claim)
	if err != nil {
		t.Fatal(err)
	}
	more := migClaim("too-much", false, "1g.10gb")
	more.Spec.Devices.Requests[0].Exactly.Selectors = append(more.Spec.Devices.Requests[0].Exactly.Selectors,
		resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: onGPU1}})
	if _, err := runClaim(ctx, t, c, more); !errors.Is(err, ErrUnschedulable) {
		t.Fatalf("an eighth compute slice on GPU 1: %v, want unschedulable", err)
	}
	want := append(expectedInstances(t, c, res.Claims[0].Claim), "gpu-1:3g.40gb@4")
	sort.Strings(want)
	if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, want) {
		t.Fatalf("hardware holds %v, want %v", got, want)
	}

	// Releasing gpudra's partitions leaves the admin's instance and its
	// MIG mode alone; so does a restart.
	if err := c.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	adminOnly := []string{"gpu-1:3g.40gb@4", "gpu-1:mig-on"}
	if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, adminOnly) {
		t.Fatalf("after release the hardware holds %v, want the admin's %v", got, adminOnly)
	}
	if c, err = c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, adminOnly) {
		t.Fatalf("after a restart the hardware holds %v, want the admin's %v", got, adminOnly)
	}
	if len(c.Driver.AdminInstances()[g1.UUID]) != 1 {
		t.Errorf("the restarted plugin does not report the admin's instance")
	}
}

func publishedDevices(ctx context.Context, t *testing.T, c *Cluster) map[string]bool {
	t.Helper()
	list, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range list {
		for _, d := range s.Spec.Devices {
			out[d.Name] = true
		}
	}
	return out
}

// TestFallbackWithoutPartitionableDevices: an API server without
// DRAPartitionableDevices drops counters and counter consumption from
// stored slices. The plugin notices (DroppedFieldsError), says so, and
// publishes whole GPUs only, which still schedule.
func TestFallbackWithoutPartitionableDevices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := NewClientset()
	strip := func(action k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		// Creates and updates: k8stesting.UpdateAction has the same
		// methods as CreateAction.
		if a, ok := action.(k8stesting.CreateAction); ok {
			obj = a.GetObject()
		}
		if s, ok := obj.(*resourceapi.ResourceSlice); ok {
			s.Spec.SharedCounters = nil
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].ConsumesCounters = nil
			}
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "resourceslices", strip)
	client.PrependReactor("update", "resourceslices", strip)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t)}, client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	applyClasses(ctx, t, c)

	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return c.Driver.WholeGPUsOnly() && !hasMIG(publishedDevices(ctx, t, c)), nil
	}); err != nil {
		t.Fatalf("whole GPUs only: %v; published %d devices", c.Driver.WholeGPUsOnly(), len(publishedDevices(ctx, t, c)))
	}
	waitPublished(t, c) // the controller settled on the new generation
	// The 8 whole GPUs, and the monitoring device of each.
	if got := publishedDevices(ctx, t, c); len(got) != 16 {
		t.Errorf("published %v, want the 8 whole GPUs and their 8 monitoring devices", got)
	}
	res, err := runClaim(ctx, t, c, gpuClaim("whole", 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(allocatedDevices(res)); n != 2 {
		t.Errorf("allocated %d GPUs, want 2", n)
	}
}

func hasMIG(devices map[string]bool) bool {
	for name := range devices {
		if strings.Contains(name, "-mig-") {
			return true
		}
	}
	return false
}
