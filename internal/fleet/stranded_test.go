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
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// islandNode is an 8-GPU node of two NVLink islands of four (nvlinkGroup
// 0 and 4), as a DGX with two NVSwitch trays would publish it.
func islandNode(name string) *resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for i := range 8 {
		d := gpuDev(i, h100, fmt.Sprintf("GPU-%s-%d", name, i))
		d.Attributes["nvlinkGroup"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(i / 4 * 4))}
		devs = append(devs, d)
	}
	return slice(name, 1, devs...)
}

// gpuClass is gpudra's whole-GPU class, mapped to nvidia.com/gpu.
func gpuClass() *resourceapi.DeviceClass {
	c := class("gpu.gpudra.io", driver)
	c.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	return c
}

// want asks for count GPUs, on one NVLink island when sameIsland.
func want(name string, count int64, sameIsland bool) *resourceapi.ResourceClaim {
	c := claim("ns", name, "gpu.gpudra.io", time.Minute)
	c.Spec.Devices.Requests[0].Exactly.Count = count
	if sameIsland {
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/nvlinkGroup"))}}
	}
	return c
}

// holding allocates the node's GPUs to a running claim.
func holding(name, node string, gpus ...int) *resourceapi.ResourceClaim {
	var ids []DeviceID
	for _, g := range gpus {
		ids = append(ids, DeviceID{node, fmt.Sprintf("gpu-%d", g)})
	}
	return allocated(claim("ns", name, "gpu.gpudra.io", time.Hour), false, ids...)
}

// unscheduled is a pod waiting for the scheduler.
func unscheduled(name string, claims ...string) *corev1.Pod {
	return pod("ns", name, corev1.PodPending, claims...)
}

func TestStranded(t *testing.T) {
	base := func() Inputs {
		return Inputs{
			DriverName: driver, Now: now,
			Slices:  []*resourceapi.ResourceSlice{islandNode("node-a"), islandNode("node-b")},
			Nodes:   []*corev1.Node{node("node-a", true, true), node("node-b", true, true)},
			Classes: []*resourceapi.DeviceClass{gpuClass()},
			Claims: []*resourceapi.ResourceClaim{
				// node-a: 2 of island 0 used; free 2, 3 (island 0) and 4-7.
				holding("run-a", "node-a", 0, 1),
				// node-b: island 0 and one of island 4 used; free 5, 6, 7.
				holding("run-b", "node-b", 0, 1, 2, 3, 4),
			},
		}
	}
	with := func(in Inputs, claims []*resourceapi.ResourceClaim, pods ...*corev1.Pod) Inputs {
		in.Claims = append(in.Claims, claims...)
		in.Pods = append(in.Pods, pods...)
		return in
	}
	eightOnIsland := want("eight", 8, true)
	fourOnIsland := want("four", 4, true)
	one := want("one", 1, false)
	two := want("two", 2, false)

	for _, tc := range []struct {
		name          string
		in            Inputs
		stranded      map[GPUKey]int
		pending       int
		unsatisfiable int
	}{
		{
			name:     "nothing waits: free GPUs are idle, not stranded",
			in:       base(),
			stranded: map[GPUKey]int{},
		},
		{
			name: "eight on one island waits: every free GPU is stranded (9 free, islands of 4)",
			in:   with(base(), []*resourceapi.ResourceClaim{eightOnIsland}, unscheduled("p8", "eight")),
			stranded: map[GPUKey]int{
				{"node-a", h100}: 6, {"node-b", h100}: 3,
			},
			pending: 1, unsatisfiable: 1,
		},
		{
			name: "four on one island fits node-a's island 4: the rest is stranded",
			in:   with(base(), []*resourceapi.ResourceClaim{eightOnIsland, fourOnIsland}, unscheduled("p8", "eight"), unscheduled("p4", "four")),
			stranded: map[GPUKey]int{
				{"node-a", h100}: 2, // GPUs 2 and 3: island 0 has only two free
				{"node-b", h100}: 3, // island 4 has three free
			},
			pending: 2, unsatisfiable: 1,
		},
		{
			name:     "one GPU anywhere: nothing is stranded",
			in:       with(base(), []*resourceapi.ResourceClaim{eightOnIsland, one}, unscheduled("p8", "eight"), unscheduled("p1", "one")),
			stranded: map[GPUKey]int{},
			pending:  2, unsatisfiable: 1,
		},
		{
			// Any one of 5, 6, 7 could be in a pair, but only two of them
			// can be used at once: one stays free whatever is placed.
			name:     "pairs: node-b's third free GPU is left over",
			in:       with(base(), []*resourceapi.ResourceClaim{two}, unscheduled("p2", "two")),
			stranded: map[GPUKey]int{{"node-b", h100}: 1},
			pending:  1,
		},
		{
			name: "a legacy pod's nvidia.com/gpu: 8 through the extended resource mapping",
			in: with(base(), nil, func() *corev1.Pod {
				p := unscheduled("legacy")
				p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}
				return p
			}()),
			stranded: map[GPUKey]int{{"node-a", h100}: 6, {"node-b", h100}: 3},
			pending:  1, unsatisfiable: 1,
		},
		{
			name: "tainted and unschedulable: not free, so not stranded",
			in: func() Inputs {
				in := with(base(), []*resourceapi.ResourceClaim{eightOnIsland}, unscheduled("p8", "eight"))
				in.Slices[0].Spec.Devices[7] = tainted(in.Slices[0].Spec.Devices[7])
				in.Nodes[1] = node("node-b", true, false)
				return in
			}(),
			stranded: map[GPUKey]int{{"node-a", h100}: 5},
			pending:  1, unsatisfiable: 1,
		},
		{
			name: "pods that are bound, finished or going are not waiting",
			in: func() Inputs {
				in := with(base(), []*resourceapi.ResourceClaim{eightOnIsland, want("e2", 8, true), want("e3", 8, true)},
					pod("ns", "done", corev1.PodSucceeded, "eight"), unscheduled("going", "e2"))
				in.Pods[1].DeletionTimestamp = ptr.To(metav1.Now())
				bound := unscheduled("bound", "e3")
				bound.Spec.NodeName = "node-a"
				in.Pods = append(in.Pods, bound)
				return in
			}(),
			stranded: map[GPUKey]int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Strand(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Stranded) != fmt.Sprint(tc.stranded) {
				t.Errorf("stranded = %v, want %v", got.Stranded, tc.stranded)
			}
			if got.PendingPods != tc.pending || got.Unsatisfiable != tc.unsatisfiable {
				t.Errorf("pending %d, unsatisfiable %d; want %d, %d", got.PendingPods, got.Unsatisfiable, tc.pending, tc.unsatisfiable)
			}
		})
	}
}

// TestStrandedShapesOnce: a thousand identical pending pods are one shape,
// checked once.
func TestStrandedShapesOnce(t *testing.T) {
	in := Inputs{
		DriverName: driver, Now: now,
		Slices:  []*resourceapi.ResourceSlice{islandNode("node-a")},
		Classes: []*resourceapi.DeviceClass{gpuClass()},
	}
	for i := range 1000 {
		name := fmt.Sprintf("c%d", i)
		in.Claims = append(in.Claims, want(name, 8, true))
		in.Pods = append(in.Pods, unscheduled("p"+name, name))
	}
	got, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Shapes != 1 || got.PendingPods != 1000 || got.Unsatisfiable != 1000 || got.Stranded[GPUKey{"node-a", h100}] != 8 {
		t.Errorf("got %+v", got)
	}
	if got.Filters > 2 {
		t.Errorf("%d allocator calls for one shape on one node", got.Filters)
	}
}

// TestStrandedNodesAlike: nodes alike but for their GPUs' identities are
// asked about once per state; the answer reaches each of them. A selector
// on an identity is asked about on every node.
func TestStrandedNodesAlike(t *testing.T) {
	in := Inputs{DriverName: driver, Now: now, Classes: []*resourceapi.DeviceClass{gpuClass()}}
	for i := range 100 {
		n := fmt.Sprintf("node-%d", i)
		in.Slices = append(in.Slices, islandNode(n))
		in.Nodes = append(in.Nodes, node(n, true, true))
		if i%2 == 0 {
			// Half the nodes: island 0 busy, so four on one island fit
			// only on island 4; the other half fit on either.
			in.Claims = append(in.Claims, holding("run-"+n, n, 0))
		}
	}
	in.Claims = append(in.Claims, want("four", 4, true))
	in.Pods = append(in.Pods, unscheduled("p4", "four"))
	got, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// Busy nodes: 7 free, four of island 4 usable, GPUs 1-3 stranded.
	// Idle nodes: two copies fit, nothing stranded.
	for i := range 100 {
		want := 0
		if i%2 == 0 {
			want = 3
		}
		if n := got.Stranded[GPUKey{fmt.Sprintf("node-%d", i), h100}]; n != want {
			t.Fatalf("node-%d: %d stranded, want %d", i, n, want)
		}
	}
	if got.Filters > 10 {
		t.Errorf("%d allocator calls for 100 nodes in two states; nodes alike should be asked about once", got.Filters)
	}

	// A selector on a GPU's UUID: only that node's GPU can be used; the
	// answer is node-specific and must not be copied to the others.
	uuid := "GPU-node-3-5"
	c := want("that-gpu", 1, false)
	c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.attributes['%s'].uuid == '%s'", driver, uuid)}}}
	in.Claims = append(in.Claims[:len(in.Claims)-1], c)
	in.Pods = []*corev1.Pod{unscheduled("p1", "that-gpu")}
	got, err = Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range got.Stranded {
		total += n
	}
	// 50 busy nodes × 7 free + 50 idle × 8 free, all but one stranded.
	if want := 50*7 + 50*8 - 1; total != want || got.Stranded[GPUKey{"node-3", h100}] != 7 {
		t.Errorf("%d stranded in all, %d on node-3; want %d and 7", total, got.Stranded[GPUKey{"node-3", h100}], want)
	}
}

func TestFingerprintIgnoresIdentities(t *testing.T) {
	f := fingerprintOf
	a, b := islandNode("node-a"), islandNode("node-b")
	if f(a) != f(b) {
		t.Error("two nodes alike but for UUIDs differ")
	}
	c := islandNode("node-c")
	c.Spec.Devices[3].Attributes["productName"] = str("NVIDIA A100-SXM4-80GB")
	if f(a) == f(c) {
		t.Error("a different model does not change the fingerprint")
	}
	d := islandNode("node-d")
	d.Spec.Devices[0] = tainted(d.Spec.Devices[0])
	if f(a) == f(d) {
		t.Error("a taint does not change the fingerprint")
	}
}
