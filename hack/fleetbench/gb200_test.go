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

package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvlinkpools"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// gb200NodeSlices builds the slices of a GB200 fleet's n trays as publish
// does, named (the fake clientset does not fill in generated names).
func gb200NodeSlices(t *testing.T, n int) [][]*resourceapi.ResourceSlice {
	t.Helper()
	dir := t.TempDir()
	out := make([][]*resourceapi.ResourceSlice, n)
	for i := range n {
		profile, err := trayProfile(dir, i)
		if err != nil {
			t.Fatal(err)
		}
		err = fakenodes.WithNode(context.Background(), profile, nodeName(i), dir, func(node gpu.Node, sysfsRoot string) error {
			pool, err := nodeSlices(node, sysfsRoot, driverName, layoutGpudra, fleetSpareNode(i, false, false))
			out[i] = sliceObjects(driverName, nodeName(i), pool)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range out[i] {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, j)
		}
	}
	return out
}

// TestGB200Fleet: a GB200 fleet's trays are discovered in their rack's
// NVLink domain, 18 to a domain; the label the benchmark puts on each Node
// is the one gpudra-controller puts there, and the channel pools it
// publishes are the controller's, each letting in exactly its domain's
// trays.
func TestGB200Fleet(t *testing.T) {
	const n = 2*traysPerDomain + 3 // two full racks and a partial one
	nodeSlices := gb200NodeSlices(t, n)
	domains := fleetDomains(n)
	if len(domains) != 3 {
		t.Fatalf("%d trays: domains %v, want 3", n, domains)
	}
	label := slicebuilder.NVLinkDomainLabel(driverName)
	trays := map[string]int{}
	var objects []runtime.Object
	objects = append(objects, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nvlink-channel.gpudra.io", UID: "class-uid"}})
	for i := range n {
		name := nodeName(i)
		gpus := 0
		for _, s := range nodeSlices[i] {
			for _, d := range s.Spec.Devices {
				if d.Attributes[slicebuilder.AttrType].StringValue != nil && *d.Attributes[slicebuilder.AttrType].StringValue == slicebuilder.TypeGPU {
					gpus++
				}
			}
			objects = append(objects, s)
		}
		if gpus != gpusPerTray {
			t.Errorf("%s: %d whole GPUs published, want %d", name, gpus, gpusPerTray)
		}
		got, err := nvlinkpools.NodeDomain(driverName, name, nodeSlices[i])
		if err != nil {
			t.Fatal(err)
		}
		labels := nodeLabels(name, i, profileGB200)
		if got != labels[label] || got != domains[i/traysPerDomain] {
			t.Errorf("%s: its GPUs are in domain %q, the benchmark labels it %q, want %q", name, got, labels[label], domains[i/traysPerDomain])
		}
		trays[got]++
		// The controller writes the labels; the Node starts without them.
		delete(labels, label)
		delete(labels, slicebuilder.IMEXReadyLabel(driverName))
		objects = append(objects, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	}
	if want := map[string]int{domains[0]: 18, domains[1]: 18, domains[2]: 3}; !reflect.DeepEqual(trays, want) {
		t.Errorf("trays per domain %v, want %v", trays, want)
	}
	if _, has := nodeLabels("h100", 0, "dgx-h100")[label]; has {
		t.Errorf("a dgx-h100 node gets the NVLink domain label")
	}

	// gpudra-controller on the same Nodes and slices.
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cs := gpudratest.SliceClientset(objects...)
	done := make(chan error, 1)
	go func() {
		done <- nvlinkpools.Run(ctx, nvlinkpools.Config{DriverName: driverName, Client: cs, OwnerClass: "nvlink-channel.gpudra.io"})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nvlinkpools.Run: %v", err)
		}
	}()
	want := channelPoolObjects(domains, slicebuilder.DefaultChannels)
	var pools []resourceapi.ResourceSlice
	var nodes []v1.Node
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pools = pools[:0]
		slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			if s.Spec.NodeName == nil {
				pools = append(pools, s)
			}
		}
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		nodes = list.Items
		labelled := 0
		for _, node := range nodes {
			if node.Labels[label] != "" && node.Labels[slicebuilder.IMEXReadyLabel(driverName)] != "" {
				labelled++
			}
		}
		return len(pools) == len(want) && labelled == n, nil
	})
	if err != nil {
		t.Fatalf("waiting for the controller's labels and %d pools (have %d): %v", len(want), len(pools), err)
	}
	for _, node := range nodes {
		var i int
		if _, err := fmt.Sscanf(node.Name, "fleet-%d", &i); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{label, slicebuilder.IMEXReadyLabel(driverName)} {
			if got, bench := node.Labels[key], nodeLabels(node.Name, i, profileGB200)[key]; got != bench {
				t.Errorf("%s: the controller labels it %s=%q, the benchmark %q", node.Name, key, got, bench)
			}
		}
	}
	byPool := map[string]resourceapi.ResourceSliceSpec{}
	for _, s := range pools {
		byPool[s.Spec.Pool.Name] = s.Spec
	}
	for _, w := range want {
		got, ok := byPool[w.Spec.Pool.Name]
		if !ok {
			t.Errorf("the controller publishes no pool %s", w.Spec.Pool.Name)
			continue
		}
		// The generation is the controller's to count.
		got.Pool.Generation = w.Spec.Pool.Generation
		if !reflect.DeepEqual(got, w.Spec) {
			t.Errorf("pool %s: the benchmark's differs from the controller's:\n%+v\n%+v", w.Spec.Pool.Name, w.Spec, got)
		}
		// Each pool lets in its domain's trays and no other.
		sel, err := nodeaffinity.NewNodeSelector(w.Spec.NodeSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range nodes {
			domain := node.Labels[label]
			if sel.Match(&node) != (slicebuilder.ChannelPoolName(domain) == w.Spec.Pool.Name) {
				t.Errorf("pool %s: node %s of domain %s matched %v", w.Spec.Pool.Name, node.Name, domain, sel.Match(&node))
			}
		}
	}
}

// TestGangJobs: a gang job's pods each name their tray claim, the channel
// claim of their job when it has one, and their job's rack; jobs take one
// rack each.
func TestGangJobs(t *testing.T) {
	channel, _ := workloadByName("gang16-channel")
	plain, _ := workloadByName("gang16-no-channel")
	for _, tc := range []struct {
		trays, maxPods, want int
	}{
		{1008, 10000, 56}, // one job per rack
		{1008, 448, 28},   // --max-pods
		{1008, 15, 0},     // not one job
		{17, 100, 0},      // not one rack
		{39, 100, 2},
	} {
		if got := gangJobs(channel, tc.trays, tc.maxPods); got != tc.want {
			t.Errorf("gangJobs(%d trays, %d pods) = %d, want %d", tc.trays, tc.maxPods, got, tc.want)
		}
	}
	claim, pods := gangNames(channel, 3)
	if len(pods) != 16 {
		t.Fatalf("%d pods in a job, want 16", len(pods))
	}
	p := gangPod("fleet", pods[0], claim, domainOfRack(3))
	if p.Spec.NodeSelector[slicebuilder.NVLinkDomainLabel(driverName)] != domainOfRack(3) {
		t.Errorf("pod's node selector %v, want rack 3's domain", p.Spec.NodeSelector)
	}
	var named []string
	for _, c := range p.Spec.ResourceClaims {
		named = append(named, *c.ResourceClaimName)
	}
	if want := []string{pods[0], claim}; !reflect.DeepEqual(named, want) {
		t.Errorf("pod's claims %v, want %v", named, want)
	}
	if len(p.Spec.Containers[0].Resources.Claims) != 2 {
		t.Errorf("container uses %v, want both claims", p.Spec.Containers[0].Resources.Claims)
	}
	if q := gangPod("fleet", pods[0], "", domainOfRack(3)); len(q.Spec.ResourceClaims) != 1 || len(q.Spec.Containers[0].Resources.Claims) != 1 {
		t.Errorf("a pod without channel names %v", q.Spec.ResourceClaims)
	}
	if plain.channel || !channel.channel || plain.gang != channel.gang {
		t.Errorf("the gang workloads must differ only by the channel: %+v, %+v", plain, channel)
	}
	if trayClaimSpec().Devices.Requests[0].Exactly.Count != gpusPerTray {
		t.Errorf("a pod's claim asks for %d GPUs, want a tray's %d", trayClaimSpec().Devices.Requests[0].Exactly.Count, gpusPerTray)
	}
}

// TestGB200Report: a GB200 run's row puts the two gang workloads side by
// side with their ratios and the writes seen.
func TestGB200Report(t *testing.T) {
	zero := 0
	run := runResult{Nodes: 1008, Profile: profileGB200, Layout: layoutGpudra,
		Publish: publishStats{ChannelPools: 56, ChannelSlices: 56, Channels: 127},
		Cells: []cellResult{
			{Workload: "gang16-channel", State: "empty", Jobs: 28, Pods: 448, Scheduled: 448, PodsPerSecond: 18, CPUMsPerPod: 26, SliceWrites: &zero, NodeWrites: &zero},
			{Workload: "gang16-no-channel", State: "empty", Jobs: 28, Pods: 448, Scheduled: 448, PodsPerSecond: 20, CPUMsPerPod: 20, SliceWrites: &zero, NodeWrites: &zero},
		}}
	md := gb200Markdown([]runResult{run}, "make bench-fleet", "v1.37.2")
	for _, want := range []string{"| 1008 | 56 | 127 | 56 | 28 | 448 |", "0.90×", "1.30×", "0 / 0, 0 / 0"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
