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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/plugin"
)

// startSharedCluster starts a simulated node that publishes shareable
// whole GPUs (consumable capacity), shares them as shareSharing says when
// a claim does not ("MPS", "TimeSlicing" or "None"), and checks its MPS
// daemons often.
func startSharedCluster(t testing.TB, profile, shareSharing string) (context.Context, *Cluster) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: profile, ConsumableCapacity: true, ShareSharing: shareSharing, MPSCheckInterval: 250 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("start simulated node: %v", err)
	}
	t.Cleanup(func() { c.Stop(); stopAllDaemons(t, c) })
	applyClasses(ctx, t, c)
	return ctx, c
}

// stopAllDaemons stops the MPS stand-ins a test left running, so that no
// process outlives the test.
func stopAllDaemons(t testing.TB, c *Cluster) {
	l := &mps.ProcessLauncher{Root: c.Opts.MPSDir()}
	ids, _ := l.List(context.Background())
	for _, id := range ids {
		_ = l.Stop(context.Background(), mps.Daemon{ID: id, Dir: filepath.Join(c.Opts.MPSDir(), id)})
	}
}

// shareClaim asks for one share of a whole GPU (memory, and optionally
// multiprocessors) with an optional sharing section.
func shareClaim(name, memory, sms, sharing string) *resourceapi.ResourceClaim {
	claim := gpuClaim(name, 1, "")
	reqs := map[resourceapi.QualifiedName]resource.Quantity{}
	if memory != "" {
		reqs["memory"] = resource.MustParse(memory)
	}
	if sms != "" {
		reqs["multiprocessors"] = resource.MustParse(sms)
	}
	if len(reqs) > 0 {
		claim.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: reqs}
	}
	if sharing != "" {
		withConfig(claim, `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":`+sharing+`}`)
	}
	return claim
}

const (
	mpsSharing = `{"strategy":"MPS"}`
	tsLong     = `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}`
	tsShort    = `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}`
)

// nodeNVML is a second NVML client of the node's fake GPUs, as another
// process on the node (nvidia-smi) would be; shut it down when done.
func nodeNVML(t testing.TB, c *Cluster) *nvmlfake.Server {
	t.Helper()
	s, err := nvmlfake.New(nvmlfake.Options{Profile: c.Opts.Profile, NodeName: c.Opts.NodeName, StateDir: c.Opts.FakeStateDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	return s
}

// gpuPolicy is what the fake GPU holds of the sharing settings, read by a
// second process on the node.
type gpuPolicy struct {
	computeMode nvml.ComputeMode
	timeSlice   int
}

func policyOf(t testing.TB, c *Cluster, uuid string) gpuPolicy {
	t.Helper()
	s := nodeNVML(t, c)
	defer s.Shutdown()
	d, ret := s.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU %s: %v", uuid, ret)
	}
	mode, ret := d.GetComputeMode()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ts, ret := s.TimeSlice(uuid)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return gpuPolicy{computeMode: mode, timeSlice: ts}
}

// daemons lists the MPS daemons that run on the node, as processes.
func daemons(t testing.TB, c *Cluster) []string {
	t.Helper()
	ids, err := (&mps.ProcessLauncher{Root: c.Opts.MPSDir()}).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// daemonPID is the process of a running daemon, 0 if none.
func daemonPID(c *Cluster, id string) int {
	return (&mps.ProcessLauncher{Root: c.Opts.MPSDir()}).PID(mps.Daemon{ID: id, Dir: filepath.Join(c.Opts.MPSDir(), id)})
}

// uuidOf is the UUID of the GPU a whole-GPU device name stands for.
func uuidOf(t testing.TB, c *Cluster, device string) string {
	t.Helper()
	g, ok := c.Driver.Node().GPUByDeviceName(device)
	if !ok {
		t.Fatalf("no GPU %s", device)
	}
	return g.UUID
}

func onlyDevice(t testing.TB, res *PodResult) string {
	t.Helper()
	devs := allocatedDevices(res)
	if len(devs) != 1 {
		t.Fatalf("pod %s got devices %v, want one", res.Pod, devs)
	}
	return devs[0]
}

func mustEnv(t testing.TB, ctr Container, key string) string {
	t.Helper()
	v, ok := ctr.EnvValue(key)
	if !ok {
		t.Fatalf("container %s lacks %s; env: %v", ctr.Name, key, ctr.Env)
	}
	return v
}

// mountOf returns the host path mounted at the container path.
func mountOf(ctr Container, containerPath string) string {
	for _, m := range ctr.Mounts {
		if host, dst, ok := strings.Cut(m, " -> "); ok && dst == containerPath {
			return host
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func stopPod(ctx context.Context, t testing.TB, c *Cluster, res *PodResult) {
	t.Helper()
	if err := c.StopPod(ctx, res); err != nil {
		t.Fatalf("unprepare %s: %v", res.Pod, err)
	}
}

func describe(v any) string { return fmt.Sprintf("%+v", v) }

func ktestingContext(t testing.TB) (klog.Logger, context.Context) {
	return ktesting.NewTestContext(t)
}

// mpsConfig is a claim config entry for the request, of the given kind,
// asking for MPS.
func mpsConfig(kind, request string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{
		Requests: []string{request},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver:     "gpu.gpudra.io",
			Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"` + kind + `","sharing":{"strategy":"MPS"}}`)},
		}},
	}
}

// mpsClass is a whole-GPU DeviceClass whose config sets sharing.
func mpsClass(name, sharing string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: selectors("device.driver == 'gpu.gpudra.io' && device.attributes['gpu.gpudra.io'].type == 'gpu'"),
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver:     "gpu.gpudra.io",
				Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":` + sharing + `}`)},
			}}}},
		},
	}
}

func selectors(exprs ...string) []resourceapi.DeviceSelector {
	var out []resourceapi.DeviceSelector
	for _, e := range exprs {
		out = append(out, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// specContents reads every CDI spec of the node, by file name.
func specContents(t testing.TB, c *Cluster) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(c.Opts.CDIDir())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.Opts.CDIDir(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

// secondState is the node state of a second plugin over the same node
// (its checkpoint, CDI directory, fake GPUs and MPS directory): the new
// plugin of a rolling upgrade, while the old one still runs.
func secondState(ctx context.Context, t testing.TB, c *Cluster) *nodestate.State {
	t.Helper()
	be, err := backend.Open(ctx, backend.Options{Kind: "fake", NodeName: c.Opts.NodeName, FakeProfile: c.Opts.Profile, FakeStateDir: c.Opts.FakeStateDir(), DriverRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	node, err := be.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node.Name = c.Opts.NodeName
	cdi, err := cdispec.New(c.Opts.CDIDir(), c.Opts.DriverName)
	if err != nil {
		t.Fatal(err)
	}
	bootID, err := checkpoint.BootID(c.Opts.BootIDPath())
	if err != nil {
		t.Fatal(err)
	}
	s, err := nodestate.New(nodestate.Options{
		DriverName: c.Opts.DriverName,
		Node:       node,
		Hardware:   be,
		CDI:        cdi,
		Checkpoint: checkpoint.NewStore(filepath.Join(c.Opts.PluginDataDir(), plugin.CheckpointFile)),
		BootID:     bootID,
		MPS:        &mps.ProcessLauncher{Root: c.Opts.MPSDir()},
		MPSDir:     c.Opts.MPSDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type resourceSliceSpec = resourceapi.ResourceSliceSpec

// dropFieldsReactor edits every ResourceSlice written to the fake API
// server, as an API server with a feature off drops its fields.
func dropFieldsReactor(drop func(*resourceSliceSpec)) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		// Creates and updates: k8stesting.UpdateAction has the same
		// methods as CreateAction.
		if a, ok := action.(k8stesting.CreateAction); ok {
			obj = a.GetObject()
		}
		if s, ok := obj.(*resourceapi.ResourceSlice); ok {
			drop(&s.Spec)
		}
		return false, nil, nil
	}
}

// nodeEvent returns "reason: message" of the first Event with the reason
// about the node, "" if none.
func nodeEvent(ctx context.Context, t testing.TB, c *Cluster, reason string) string {
	t.Helper()
	list, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Reason == reason && ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == c.Opts.NodeName {
			return ev.Reason + ": " + ev.Message
		}
	}
	return ""
}

type resourceQuantity = resource.Quantity

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
