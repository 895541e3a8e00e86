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
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/nvlinkpools"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const (
	nvlDomainA = "9f410827-489f-46fd-8203-51266ca08eb7.32766"
	nvlDomainB = "0e6a0c1b-5d77-4b8e-9b1f-2d0d6a3b1c55.1"
)

// traySlice is a tray's pool as its plugin publishes it once fabric
// discovery runs: four whole GPUs carrying the tray's NVLink domain. (The
// fake GPUs do not report fabric info yet, so the slices are made here.)
func traySlice(node, domain string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{Driver: gpu.DefaultDriverName, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := range 4 {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: gpu.WholeDeviceName(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				slicebuilder.AttrType:         {StringValue: ptr.To(slicebuilder.TypeGPU)},
				slicebuilder.AttrNVLinkDomain: {StringValue: ptr.To(domain)},
			},
		})
	}
	return s
}

// channelState is a tray's node state on the fake backend, in the domain.
func channelState(ctx context.Context, t testing.TB, node, domain string) (*nodestate.State, string) {
	t.Helper()
	dir := t.TempDir()
	be, err := backend.Open(ctx, backend.Options{Kind: "fake", NodeName: node, FakeProfile: "dgx-h100",
		FakeStateDir: filepath.Join(dir, "fake-gpus"), DriverRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	inventory, err := be.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cdiDir := filepath.Join(dir, "cdi")
	w, err := cdispec.New(cdiDir, gpu.DefaultDriverName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := nodestate.New(nodestate.Options{
		DriverName: gpu.DefaultDriverName, Node: inventory, Hardware: be, CDI: w,
		Checkpoint: checkpoint.NewStore(filepath.Join(dir, "checkpoint.json")), BootID: "boot-1",
		NVLinkDomain: func() string { return domain }, Channels: be,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, cdiDir
}

// specText is the one CDI spec in dir.
func specText(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("CDI specs in %s: %v, %v", dir, files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestNVLinkChannelJob: gpudra-controller's pool code publishes a pool per
// domain into the API server, the real allocator gives a standalone
// channel claim a channel whose allocation fences the job's pods into the
// domain, a second job gets another channel, and the claim prepared on
// two trays gives both the same channel.
//
// The trays are prepared by their node state on the fake backend rather
// than by a whole plugin: the fake GPUs report no NVLink fabric yet (issue
// 28 item 2), so a plugin would publish no domain. Their slices and their
// domain are given by hand, as that plugin will publish them.
func TestNVLinkChannelJob(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cs := gpudratest.SliceClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1"}}, traySlice("tray-1", nvlDomainA),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-2"}}, traySlice("tray-2", nvlDomainA),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-3"}}, traySlice("tray-3", nvlDomainB),
	)
	done := make(chan error, 1)
	go func() {
		done <- nvlinkpools.Run(ctx, nvlinkpools.Config{DriverName: gpu.DefaultDriverName, Client: cs})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nvlinkpools.Run: %v", err)
		}
	})
	label := slicebuilder.NVLinkDomainLabel(gpu.DefaultDriverName)
	published := func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			if n.Labels[label] == "" {
				return false, nil
			}
		}
		pools := map[string]bool{}
		slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			pools[s.Spec.Pool.Name] = true
		}
		return pools[slicebuilder.ChannelPoolName(nvlDomainA)] && pools[slicebuilder.ChannelPoolName(nvlDomainB)], nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, published); err != nil {
		t.Fatalf("waiting for the labels and the pools of both domains: %v", err)
	}

	sched := channelScheduler(ctx, t, cs)
	job := func(name string) *resourceapi.ResourceClaim {
		c := gpudratest.WithUID(gpudratest.Claim("team", name, gpudratest.Request("channel", "nvlink-channel.gpudra.io", 1)), "uid-"+name)
		scheduler.DefaultClaimSpec(&c.Spec)
		return c
	}
	on := func(node string) func(*v1.Node) bool { return func(n *v1.Node) bool { return n.Name == node } }

	first := job("llm-a")
	place, err := sched.Schedule(ctx, scheduler.StateOf(nil), []*resourceapi.ResourceClaim{first}, on("tray-1"))
	if err != nil {
		t.Fatal(err)
	}
	first.Status.Allocation = place.Results[0]
	r := first.Status.Allocation.Devices.Results[0]
	if r.Pool != slicebuilder.ChannelPoolName(nvlDomainA) || r.Device == slicebuilder.ChannelDeviceName(0) {
		t.Fatalf("the job got %s/%s, want an exclusive channel of domain A's pool", r.Pool, r.Device)
	}
	sel := first.Status.Allocation.NodeSelector
	if want := slicebuilder.ChannelPoolSelector(gpu.DefaultDriverName, nvlDomainA); !equality.Semantic.DeepEqual(sel, want) {
		t.Fatalf("allocation node selector %+v, want domain A's pool selector %+v (%s In [%s], IMEX daemon ready)", sel, want, label, nvlDomainA)
	}

	// The job's other pods: on the domain's other tray they fit, on the
	// other domain's tray they do not.
	held := scheduler.StateOf([]*resourceapi.ResourceClaim{first})
	if _, err := sched.Schedule(ctx, held, []*resourceapi.ResourceClaim{first}, on("tray-2")); err != nil {
		t.Errorf("a pod of the job on tray-2 (domain A): %v", err)
	}
	if _, err := sched.Schedule(ctx, held, []*resourceapi.ResourceClaim{first}, on("tray-3")); !errors.Is(err, scheduler.ErrUnschedulable) {
		t.Errorf("a pod of the job on tray-3 (domain B): %v, want unschedulable", err)
	}

	// A second job in the domain gets another channel.
	second := job("llm-b")
	place, err = sched.Schedule(ctx, held, []*resourceapi.ResourceClaim{second}, on("tray-2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := place.Results[0].Devices.Results[0]; got.Pool == r.Pool && got.Device == r.Device {
		t.Errorf("two jobs got the same channel %s/%s", got.Pool, got.Device)
	}

	// The first job prepared on both trays: the same channel in both
	// containers, and none on the other domain's tray.
	var specs []string
	for _, tray := range []string{"tray-1", "tray-2"} {
		s, dir := channelState(ctx, t, tray, nvlDomainA)
		if _, err := s.Prepare(ctx, first); err != nil {
			t.Fatalf("prepare on %s: %v", tray, err)
		}
		specs = append(specs, specText(t, dir))
	}
	n, _ := gpu.ParseChannelDeviceName(r.Device)
	for i, spec := range specs {
		for _, want := range []string{nodestate.EnvIMEXChannel + "=" + strconv.Itoa(n), nodestate.EnvNVLinkDomain + "=" + nvlDomainA,
			"/dev/nvidia-caps-imex-channels/channel" + strconv.Itoa(n), "minor: " + strconv.Itoa(n)} {
			if !strings.Contains(spec, want) {
				t.Errorf("tray-%d's CDI spec lacks %q:\n%s", i+1, want, spec)
			}
		}
	}
	s, _ := channelState(ctx, t, "tray-3", nvlDomainB)
	if _, err := s.Prepare(ctx, first); err == nil || !strings.Contains(err.Error(), nvlDomainB) {
		t.Errorf("domain A's channel prepared on a tray of domain B: %v", err)
	}
}

// channelScheduler is the offline scheduler core over what the API server
// holds: the trays' slices, the channel pools, the Nodes with their labels
// and the DeviceClasses gpudra ships.
func channelScheduler(ctx context.Context, t *testing.T, cs *fake.Clientset) *scheduler.Scheduler {
	t.Helper()
	classes, err := LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	sliceList, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var slices []*resourceapi.ResourceSlice
	for i := range sliceList.Items {
		slices = append(slices, &sliceList.Items[i])
	}
	nodeList, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*v1.Node
	for i := range nodeList.Items {
		nodes = append(nodes, &nodeList.Items[i])
	}
	features, err := scheduler.FeaturesFor(scheduler.DefaultKubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(features, scheduler.NewClasses(classes), slices, nil)
	sched.UseNodes(nodes)
	return sched
}

// BenchmarkChannelPrepare prepares one IMEX channel of the node's NVLink
// domain in process (the node state: checkpoint writes and the CDI spec
// with the channel's device node), what a replacement pod of a running
// job pays on a tray of its domain, and reports p50 and p99. The IMEX
// daemon's readiness check is not in it: gpudra runs no daemon yet.
func BenchmarkChannelPrepare(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	s, _ := channelState(ctx, b, "tray-1", nvlDomainA)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		name := "job-" + strconv.Itoa(i)
		c := gpudratest.WithUID(gpudratest.Claim("team", name, gpudratest.Request("channel", "nvlink-channel.gpudra.io", 1)), "uid-"+name)
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "channel", Driver: gpu.DefaultDriverName, Pool: slicebuilder.ChannelPoolName(nvlDomainA), Device: slicebuilder.ChannelDeviceName(1 + i%slicebuilder.DefaultChannels),
		}}}}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := s.Unprepare(ctx, nodestate.ClaimRef{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
}
