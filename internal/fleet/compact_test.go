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

package fleet

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/fakenodes"
)

// TestCompactRoundTrip: what the allocator gets back from a compact slice
// is the slice, for every slice the plugin publishes on a DGX H100 (whole
// GPUs, MIG placements, counters) and for the odd ones (taints, per-device
// node selection, no node at all).
func TestCompactRoundTrip(t *testing.T) {
	sl, err := fakenodes.Slices(context.Background(), "dgx-h100", 2, driver)
	if err != nil {
		t.Fatal(err)
	}
	perDevice := slice("", 1, gpuDev(0, h100, "GPU-x"), gpuDev(1, h100, "GPU-y"))
	perDevice.Spec.NodeName, perDevice.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
	perDevice.Spec.Devices[0].NodeName, perDevice.Spec.Devices[1].NodeName = ptr.To("node-x"), ptr.To("node-y")
	sl = append(sl, slice("node-t", 1, tainted(gpuDev(0, h100, "GPU-t0")), migDev("gpu-0-mig-1g10gb-0", h100, "1g.10gb", "GPU-t0")), perDevice)
	var c Compactor
	for i, s := range sl {
		s.UID, s.ResourceVersion = types.UID(s.Name), "7"
		cs := c.Compact(s)
		if got := cs.Full(); !apiequality.Semantic.DeepEqual(got, s) {
			t.Fatalf("slice %d (%s) rebuilt differs:\n got %+v\nwant %+v", i, s.Name, got, s)
		}
		want := readAll(s)
		var got []Device
		for _, d := range cs.devices() {
			got = append(got, *d)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("slice %s: accounting devices differ:\n compact %+v\n    full %+v", s.Name, got, want)
		}
	}
	if got := c.Compact(perDevice).shape.nodeNames; !slices.Equal(got, []string{"node-x", "node-y"}) {
		t.Errorf("per-device nodes %v", got)
	}
}

// readAll reads a full slice's devices, as the accounting did before
// slices were compacted.
func readAll(s *resourceapi.ResourceSlice) []Device {
	var out []Device
	for i := range s.Spec.Devices {
		d := readDevice(s.Spec.Driver, &s.Spec.Devices[i])
		d.ID.Pool = s.Spec.Pool.Name
		d.Node = ptr.Deref(s.Spec.NodeName, "")
		out = append(out, d)
	}
	return out
}

// TestCompactSharesShapes: slices alike but for their identities and names
// share one shape; one that differs otherwise gets its own; a shape no
// slice uses any more is dropped.
func TestCompactSharesShapes(t *testing.T) {
	var c Compactor
	a, b := c.Compact(islandNode("node-a")), c.Compact(islandNode("node-b"))
	if a.shape != b.shape {
		t.Error("two nodes alike but for their UUIDs have two shapes")
	}
	if a.identities[0] == b.identities[0] {
		t.Errorf("identities not kept per slice: %v", a.identities)
	}
	odd := islandNode("node-c")
	odd.Spec.Devices[2] = tainted(odd.Spec.Devices[2])
	if c.Compact(odd).shape == a.shape {
		t.Error("a tainted device shares the shape of untainted ones")
	}
	// A shape's key includes which attributes are identities: a slice
	// without UUIDs is not a slice with them.
	noUUID := islandNode("node-d")
	for _, d := range noUUID.Spec.Devices {
		delete(d.Attributes, "uuid")
	}
	if c.Compact(noUUID).shape == a.shape {
		t.Error("a slice without UUIDs shares the shape of one with them")
	}

	// Many distinct slices, none kept: the table does not keep their
	// shapes.
	for i := range 500 {
		s := islandNode("node-a")
		s.Spec.Devices[0].Attributes["productName"] = str(string(rune('a'+i%26)) + string(rune('a'+i/26)))
		c.Compact(s)
	}
	runtime.GC()
	runtime.GC()
	c.mu.Lock()
	c.sweep()
	n := len(c.shapes)
	c.mu.Unlock()
	if n > 1 {
		t.Errorf("%d shapes kept after 500 slices nobody holds; want the one a and b use", n)
	}
	if e := c.Compact(islandNode("node-e")); e.shape != a.shape {
		t.Error("the shape a and b use was dropped")
	}
	if len(c.shapes) > 64 {
		t.Errorf("%d entries: the table grows past its sweep size", len(c.shapes))
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}
