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
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

// TestStrandedMIG covers the steps of strand that the whole-GPU tables do
// not: a GPU with a partition allocated is not free; a MIG partition a
// waiting pod (or a gang's pod) would take makes its whole GPU usable; a
// context that ends stops the computation with its error.
func TestStrandedMIG(t *testing.T) {
	// node-a: two GPUs, each offering one 1g.10gb partition.
	base := func() Inputs {
		return Inputs{
			DriverName: driver, Now: now,
			Slices: []*resourceapi.ResourceSlice{slice("node-a", 1,
				gpuDev(0, h100, "GPU-a0"), gpuDev(1, h100, "GPU-a1"),
				migDev("gpu-0-mig-1g10gb-0", h100, "1g.10gb", "GPU-a0"), migDev("gpu-1-mig-1g10gb-0", h100, "1g.10gb", "GPU-a1"))},
			Nodes: []*corev1.Node{node("node-a", true, true)},
			Classes: []*resourceapi.DeviceClass{gpuClass(), gpudratest.Class("mig.gpudra.io",
				fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'mig'", driver, driver))},
		}
	}
	partition := func(name string) *resourceapi.ResourceClaim {
		return claim("ns", name, "mig.gpudra.io", time.Minute)
	}
	for _, tc := range []struct {
		name          string
		in            func() Inputs
		cancel        bool
		stranded      map[GPUKey]int
		unsatisfiable int
	}{
		{
			name: "a GPU with a partition held is not free: only the other one is stranded",
			in: func() Inputs {
				in := base()
				in.Claims = []*resourceapi.ResourceClaim{
					allocated(partition("run"), false, DeviceID{"node-a", "gpu-0-mig-1g10gb-0"}),
					want("eight", 8, false),
				}
				in.Pods = []*corev1.Pod{unscheduled("p8", "eight")}
				return in
			},
			stranded:      map[GPUKey]int{{"node-a", h100}: 1},
			unsatisfiable: 1,
		},
		{
			name: "a waiting pod's partitions make their whole GPUs usable",
			in: func() Inputs {
				in := base()
				in.Claims = []*resourceapi.ResourceClaim{partition("one-mig")}
				in.Pods = []*corev1.Pod{unscheduled("p", "one-mig")}
				return in
			},
			stranded: map[GPUKey]int{},
		},
		{
			name: "a gang's partitions make their whole GPUs usable",
			in: func() Inputs {
				in := base()
				in.PodGroups = []*schedulingv1beta1.PodGroup{gang("pair", 2)}
				in.Claims = []*resourceapi.ResourceClaim{partition("mig-0"), partition("mig-1")}
				in.Pods = []*corev1.Pod{member("w0", "pair", "mig-0"), member("w1", "pair", "mig-1")}
				return in
			},
			stranded: map[GPUKey]int{},
		},
		{
			name: "a context that ends stops it with the context's error",
			in: func() Inputs {
				in := base()
				in.Claims = []*resourceapi.ResourceClaim{want("one", 1, false)}
				in.Pods = []*corev1.Pod{unscheduled("p", "one")}
				return in
			},
			cancel: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			got, err := Strand(ctx, tc.in())
			if tc.cancel {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Strand after cancel: %v, want %v", err, context.Canceled)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Stranded) != fmt.Sprint(tc.stranded) {
				t.Errorf("stranded = %v, want %v", got.Stranded, tc.stranded)
			}
			if got.Unsatisfiable != tc.unsatisfiable {
				t.Errorf("unsatisfiable %d, want %d", got.Unsatisfiable, tc.unsatisfiable)
			}
		})
	}
}

// TestUnplacedSaysWhereASpareWouldGo: a partition claim whose pod may go
// only to a node that publishes no placements fits nowhere, and Unplaced
// names that node (gpudra-controller gives it a spare: a spare's
// placements, copied from node-a's, let it in there); a pod that fits is
// not listed, nor are nodes it may not go to or without a free GPU.
func TestUnplacedSaysWhereASpareWouldGo(t *testing.T) {
	in := Inputs{
		DriverName: driver, Now: now,
		Slices: []*resourceapi.ResourceSlice{
			// node-a keeps a spare: GPU 1 publishes a partition.
			slice("node-a", 1, gpuDev(0, h100, "GPU-a0"), gpuDev(1, h100, "GPU-a1"), migDev("gpu-1-mig-1g10gb-0", h100, "1g.10gb", "GPU-a1")),
			// node-b and node-c publish whole GPUs only; node-c's is held.
			sliceOf("node-b", 1, 2, partitionable(gpuDev(0, h100, "GPU-b0"), "Hopper"), partitionable(gpuDev(1, h100, "GPU-b1"), "Hopper")),
			// Where GPUs that publish no placements would publish them.
			sliceOf("node-b", 1, 2),
			slice("node-c", 1, gpuDev(0, h100, "GPU-c0")),
		},
		Nodes: []*corev1.Node{node("node-a", true, true), node("node-b", true, true), node("node-c", true, true)},
		Classes: []*resourceapi.DeviceClass{gpuClass(), gpudratest.Class("mig.gpudra.io",
			fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'mig'", driver, driver))},
		Claims: []*resourceapi.ResourceClaim{
			claim("ns", "anywhere", "mig.gpudra.io", time.Minute),
			claim("ns", "pinned", "mig.gpudra.io", time.Minute),
			holding("run-c", "node-c", 0),
		},
	}
	pinned := unscheduled("pinned-pod", "pinned")
	pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-b"}
	for _, n := range in.Nodes {
		n.Labels = map[string]string{"kubernetes.io/hostname": n.Name}
	}
	in.Pods = []*corev1.Pod{unscheduled("anywhere-pod", "anywhere"), pinned}
	got, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Unplaced) != "[{ns/pinned-pod [node-b] }]" {
		t.Errorf("unplaced %v, want the pinned pod, which may go only to node-b", got.Unplaced)
	}
}
