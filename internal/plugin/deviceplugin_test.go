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

package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
)

func TestDevicePluginResources(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name            string
		capacity, alloc v1.ResourceList
		want            []string
	}{
		{"none", v1.ResourceList{v1.ResourceCPU: q("8"), "example.com/fpga": q("2")}, nil, []string{}},
		{"whole GPUs", v1.ResourceList{"nvidia.com/gpu": q("8")}, v1.ResourceList{"nvidia.com/gpu": q("8")}, []string{"nvidia.com/gpu=8"}},
		// Unhealthy devices leave allocatable, not capacity; pods may
		// hold them.
		{"all unhealthy", v1.ResourceList{"nvidia.com/gpu": q("8")}, v1.ResourceList{"nvidia.com/gpu": q("0")}, []string{"nvidia.com/gpu=8"}},
		// The kubelet zeroes a stopped device plugin's resources.
		{"stopped", v1.ResourceList{"nvidia.com/gpu": q("0")}, v1.ResourceList{"nvidia.com/gpu": q("0")}, []string{}},
		{"MIG mixed strategy and time-slicing", v1.ResourceList{"nvidia.com/mig-1g.10gb": q("7"), "nvidia.com/gpu.shared": q("16"), "nvidia.com/gpus": q("1")}, nil,
			[]string{"nvidia.com/gpu.shared=16", "nvidia.com/mig-1g.10gb=7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DevicePluginResources(&v1.Node{Status: v1.NodeStatus{Capacity: tt.capacity, Allocatable: tt.alloc}})
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// conflictGauge is MetricDevicePluginConflict's value.
func conflictGauge(t *testing.T, d *Driver) float64 {
	t.Helper()
	families, err := d.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == MetricDevicePluginConflict.Name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not exported", MetricDevicePluginConflict.Name)
	return 0
}

// A plugin started on a node whose Node advertises nvidia.com/gpu (NVIDIA's
// device plugin runs there) publishes none of its GPUs, says why in a
// Warning Event that tells how to turn the device plugin off and in the
// metric, and publishes them once the Node no longer advertises them.
func TestDevicePluginWithdrawsGPUs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := startConfig(t)
	cfg.DevicePluginCheckInterval = 20 * time.Millisecond
	// One that names slices as the API server does: the slices are
	// deleted and created again.
	cfg.KubeClient = gpudratest.SliceClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	nodes := cfg.KubeClient.CoreV1().Nodes()
	setGPUs := func(n string) {
		t.Helper()
		node, err := nodes.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n == "" {
			delete(node.Status.Capacity, "nvidia.com/gpu")
			delete(node.Status.Allocatable, "nvidia.com/gpu")
		} else {
			node.Status.Capacity = v1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
			node.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
		}
		if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setGPUs("8")
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	published := func(ctx context.Context) int {
		list, err := cfg.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range list.Items {
			n += len(s.Spec.Devices)
		}
		return n
	}
	// Published() holds once the API server holds what the plugin wants
	// published: nothing.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return d.Published() == nil, nil
	})
	if err != nil {
		t.Fatalf("the plugin's wanted slices never reached the API server: %v (%v)", err, d.Published())
	}
	if n := published(ctx); n != 0 {
		t.Errorf("%d devices published while the Node advertises nvidia.com/gpu, want none", n)
	}
	if g := conflictGauge(t, d); g != 1 {
		t.Errorf("%s = %v, want 1", MetricDevicePluginConflict.Name, g)
	}
	// The Event, recorded asynchronously by the broadcaster.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cfg.KubeClient.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == ReasonDevicePluginConflict && e.Type == v1.EventTypeWarning && e.InvolvedObject.Kind == "Node" &&
				strings.Contains(e.Message, "nvidia.com/gpu=8") && strings.Contains(e.Message, "nvidia.com/gpu.deploy.device-plugin=false") &&
				strings.Contains(e.Message, "devicePlugin.enabled=false") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Warning Event on the Node naming the resource and how to turn the device plugin off: %v", ReasonDevicePluginConflict, err)
	}

	// The device plugin goes; the periodic check notices.
	setGPUs("")
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return published(ctx) > 0 && d.Published() == nil, nil
	})
	if err != nil {
		t.Fatalf("the GPUs were not published again after the Node stopped advertising nvidia.com/gpu: %v", err)
	}
	gpus := 0
	list, err := cfg.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, dev := range s.Spec.Devices {
			if p, ok := gpu.ParseDeviceName(dev.Name); ok && !p.MIG && !strings.HasSuffix(dev.Name, "-monitor") {
				gpus++
			}
		}
	}
	if gpus != len(d.Node().GPUs) {
		t.Errorf("%d whole GPUs published again, want %d", gpus, len(d.Node().GPUs))
	}
	if g := conflictGauge(t, d); g != 0 {
		t.Errorf("%s = %v after the device plugin went, want 0", MetricDevicePluginConflict.Name, g)
	}

	// And back: the check withdraws the GPUs of a running plugin too.
	setGPUs("8")
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return published(ctx) == 0, nil
	})
	if err != nil {
		t.Errorf("the GPUs stayed published after the device plugin came back: %v", err)
	}
}

// With IgnoreDevicePlugin the GPUs are published whatever the Node says.
func TestIgnoreDevicePlugin(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := startConfig(t)
	cfg.IgnoreDevicePlugin = true
	node, err := cfg.KubeClient.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	if _, err := cfg.KubeClient.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	if got := wantedDeviceCount(d); got == 0 {
		t.Error("no device wanted published with IgnoreDevicePlugin")
	}
	if g := conflictGauge(t, d); g != 0 {
		t.Errorf("%s = %v with IgnoreDevicePlugin, want 0", MetricDevicePluginConflict.Name, g)
	}
}

// wantedDeviceCount is how many devices the plugin wants published.
func wantedDeviceCount(d *Driver) int {
	d.pub.publishMu.Lock()
	defer d.pub.publishMu.Unlock()
	n := 0
	if d.pub.steps.wanted != nil {
		for _, s := range d.pub.steps.wanted.Slices {
			n += len(s.Devices)
		}
	}
	return n
}
