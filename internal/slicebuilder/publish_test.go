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

package slicebuilder

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

// TestSteadyStatePublish runs the real ResourceSlice controller (what
// kubeletplugin.Helper.PublishResources drives) against a fake API server:
// republishing a freshly rebuilt, unchanged inventory must cost no API
// writes, and one GPU's health change must cost exactly one.
func TestSteadyStatePublish(t *testing.T) {
	tests := []struct {
		gpus       int
		wantSlices int
		sick       int // index of the GPU that turns unhealthy
	}{
		{gpus: 8, wantSlices: 2, sick: 3},    // GPUs, monitors
		{gpus: 100, wantSlices: 4, sick: 70}, // the taint lands in the 2nd slice
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d GPUs", tt.gpus), func(t *testing.T) {
			node := h100Node("node-a", tt.gpus)
			sysfs := h100Sysfs(t, node)
			build := func(health map[string]gpu.Health) *resourceslice.DriverResources {
				t.Helper()
				res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: sysfs, Health: health})
				if err != nil {
					t.Fatal(err)
				}
				return &res
			}
			h := startPublisher(t, build(nil))

			h.waitFor(t, "initial publish", func(w writes) bool { return w.creates == tt.wantSlices })
			h.settle(t)
			if w := h.writes(); w != (writes{creates: tt.wantSlices}) {
				t.Fatalf("initial publish: %+v, want %d creates only", w, tt.wantSlices)
			}
			stored := h.slices(t)
			if len(stored) != tt.wantSlices {
				t.Fatalf("%d stored slices, want %d", len(stored), tt.wantSlices)
			}
			for i, s := range stored {
				if s.Spec.Pool.Name != "node-a" || s.Spec.Pool.ResourceSliceCount != int64(tt.wantSlices) || *s.Spec.NodeName != "node-a" {
					t.Errorf("slice %s: pool %+v, node %v", s.Name, s.Spec.Pool, s.Spec.NodeName)
				}
				want := gpu.WholeDeviceName(i * devicesPerSlice)
				if gpuSlices := (tt.gpus + devicesPerSlice - 1) / devicesPerSlice; i >= gpuSlices {
					want = gpu.MonitorDeviceName((i - gpuSlices) * devicesPerSlice)
				}
				if s.Spec.Devices[0].Name != want {
					t.Errorf("slice %s starts with %s, want %s", s.Name, s.Spec.Devices[0].Name, want)
				}
			}

			before := h.writes()
			for range 100 {
				h.update(t, build(nil))
			}
			h.settle(t)
			if w := h.writes(); w != before {
				t.Fatalf("100 unchanged republishes: writes went from %+v to %+v, want none", before, w)
			}

			sick := map[string]gpu.Health{node.GPUs[tt.sick].UUID: gpu.Unhealthy}
			h.update(t, build(sick))
			h.waitFor(t, "taint", func(w writes) bool { return w.updates == 1 })
			for range 10 {
				h.update(t, build(sick))
			}
			h.settle(t)
			if w := h.writes(); w != (writes{creates: tt.wantSlices, updates: 1}) {
				t.Fatalf("one unhealthy GPU: %+v, want exactly 1 update", w)
			}
			tainted := 0
			for _, s := range h.slices(t) {
				for _, d := range s.Spec.Devices {
					for _, taint := range d.Taints {
						if taint.Key == UnhealthyTaintKey(testDriver) {
							tainted++
						}
					}
				}
			}
			if tainted != 1 {
				t.Errorf("%d health taints stored, want 1", tainted)
			}

			// Recovery is one write too.
			h.update(t, build(nil))
			h.waitFor(t, "recovery", func(w writes) bool { return w.updates == 2 })
			h.settle(t)
			if w := h.writes(); w != (writes{creates: tt.wantSlices, updates: 2}) {
				t.Fatalf("recovery: %+v, want exactly 1 more update", w)
			}
			if st := h.ctrl.GetStats(); st.NumCreates != int64(tt.wantSlices) || st.NumUpdates != 2 || st.NumDeletes != 0 {
				t.Errorf("controller stats %+v disagree with the API actions", st)
			}
		})
	}
}

type writes struct{ creates, updates, deletes int }

// publisher is a ResourceSlice controller on a fake clientset, with a queue
// that counts finished syncs so the test knows when the controller has
// looked at an Update.
type publisher struct {
	cs    *fake.Clientset
	ctrl  *resourceslice.Controller
	queue *countingQueue
}

func startPublisher(t *testing.T, initial *resourceslice.DriverResources) *publisher {
	t.Helper()
	cs := fake.NewClientset()
	// Two gaps in the fake API server that the controller depends on:
	//  - it does not implement generateName, and the controller creates every
	//    slice with it, so without a name the second create fails with
	//    `"" already exists` forever;
	//  - it does not put resourceVersions into objects, so the controller's
	//    mutation cache cannot tell its own fresh write from an older
	//    informer copy, and a sync that runs before the watch event arrives
	//    "repairs" the slice with a second, identical update.
	var names, versions atomic.Int64
	stamp := func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(interface{ GetObject() runtime.Object }).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" && s.GenerateName != "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, names.Add(1))
		}
		s.ResourceVersion = strconv.FormatInt(versions.Add(1), 10)
		return false, nil, nil // let the tracker store it
	}
	cs.PrependReactor("create", "resourceslices", stamp)
	cs.PrependReactor("update", "resourceslices", stamp)

	queue := &countingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	ctx, cancel := context.WithCancel(context.Background())
	syncDelay := 5 * time.Millisecond
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: testDriver,
		KubeClient: cs,
		// A UID spares the controller a Node lookup the fake has no answer for.
		Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-a-uid"},
		Resources: initial,
		Queue:     queue,
		SyncDelay: &syncDelay,
		ErrorHandler: func(_ context.Context, err error, msg string) {
			t.Errorf("controller: %s: %v", msg, err)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		ctrl.Stop()
	})
	return &publisher{cs: cs, ctrl: ctrl, queue: queue}
}

// update hands the controller new resources and waits until it has synced
// at least once after that.
func (p *publisher) update(t *testing.T, res *resourceslice.DriverResources) {
	t.Helper()
	seen := p.queue.done.Load()
	p.ctrl.Update(res)
	p.poll(t, "sync after Update", func() bool { return p.queue.done.Load() > seen })
}

// settle waits until the queue is empty and any sync triggered by the
// controller's own writes (informer events, SyncDelay later) has run.
func (p *publisher) settle(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	p.poll(t, "idle queue", func() bool { return p.queue.Len() == 0 && p.queue.busy.Load() == 0 })
}

func (p *publisher) waitFor(t *testing.T, what string, cond func(writes) bool) {
	t.Helper()
	p.poll(t, what, func() bool { return cond(p.writes()) })
}

func (p *publisher) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out waiting for %s; writes so far %+v", what, p.writes())
	}
}

// writes counts the API calls that change ResourceSlices.
func (p *publisher) writes() writes {
	var w writes
	for _, a := range p.cs.Actions() {
		if a.GetResource().Resource != "resourceslices" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			w.creates++
		case "update", "patch":
			w.updates++
		case "delete", "delete-collection":
			w.deletes++
		}
	}
	return w
}

func (p *publisher) slices(t *testing.T) []resourceapi.ResourceSlice {
	t.Helper()
	list, err := p.cs.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := list.Items
	// The controller's names start with the slice's index, so name order
	// is publishing order.
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items
}

// countingQueue counts finished syncs (Done) and tracks the ones running.
type countingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	done atomic.Int64
	busy atomic.Int64
}

func (q *countingQueue) Get() (string, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.busy.Add(1)
	}
	return item, shutdown
}

func (q *countingQueue) Done(item string) {
	q.TypedRateLimitingInterface.Done(item)
	q.busy.Add(-1)
	q.done.Add(1)
}
