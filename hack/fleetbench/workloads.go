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
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

// gpusPerNode is what the dgx-h100 profile has: 8 H100s on one NVLink
// island.
const gpusPerNode = 8

// claimKind is what one pod asks for.
type claimKind string

const (
	// kindGPU: one whole GPU (DeviceClass gpu.gpudra.io).
	kindGPU claimKind = "gpu1"
	// kindGPU8: eight whole GPUs on one NVLink island.
	kindGPU8 claimKind = "gpu8"
	// kindMIG: one 1g.10gb partition (DeviceClass mig-1g.10gb.gpudra.io).
	kindMIG claimKind = "mig1g"
)

// workload is a stream of pods: kinds repeats over the pods in order.
type workload struct {
	name  string
	title string
	// kinds on an empty fleet, and on a 90% allocated one.
	kinds, busyKinds []claimKind
	// busyPacked: the 90% state leaves whole nodes free instead of one GPU
	// on most nodes (the only way a 90% allocated fleet runs 8-GPU pods).
	busyPacked bool
	// churn: pods are created and deleted for a fixed time, a constant
	// number in flight, their claims freed and reused (churn.go), instead
	// of one burst.
	churn bool
	// gang: jobs of this many pods, each pod one GB200 tray's GPUs
	// (gang.go); run on GB200 fleets only, and only these there.
	gang int
	// channel: each job also has one NVLink channel claim that every pod
	// of the job names.
	channel bool
}

var workloads = []workload{
	{name: "gpu1", title: "1 whole GPU", kinds: []claimKind{kindGPU}, busyKinds: []claimKind{kindGPU}},
	{name: "gpu8", title: "8 GPUs, one NVLink island", kinds: []claimKind{kindGPU8}, busyKinds: []claimKind{kindGPU8}, busyPacked: true},
	{name: "mig1g", title: "1g.10gb MIG", kinds: []claimKind{kindMIG}, busyKinds: []claimKind{kindMIG}},
	// Six single GPUs, three partitions and one 8-GPU job in every ten
	// pods; at 90% no node has 8 GPUs free, so the stream is 2:1.
	{name: "mixed", title: "mixed stream",
		kinds:     []claimKind{kindGPU, kindMIG, kindGPU, kindGPU8, kindGPU, kindMIG, kindGPU, kindGPU, kindMIG, kindGPU},
		busyKinds: []claimKind{kindGPU, kindMIG, kindGPU}},
	// Kubernetes' scheduler_perf DRA steady-state case: one GPU per pod,
	// pods deleted once scheduled and replaced.
	{name: "churn", title: "steady-state churn, 1 GPU per pod", kinds: []claimKind{kindGPU}, busyKinds: []claimKind{kindGPU}, churn: true},
	// Training jobs on a GB200 fleet: 16 trays of one NVLink domain, each
	// pod a tray's 4 GPUs, with and without the job's channel claim.
	{name: "gang16-channel", title: "16-tray jobs, NVLink channel", gang: 16, channel: true},
	{name: "gang16-no-channel", title: "16-tray jobs, no channel", gang: 16},
}

func workloadByName(name string) (workload, bool) {
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workload{}, false
}

// needsMIG says whether the workload asks for MIG partitions in a state.
func (w workload) needsMIG(busy bool) bool {
	for _, k := range w.kindsFor(busy) {
		if k == kindMIG {
			return true
		}
	}
	return false
}

func (w workload) kindsFor(busy bool) []claimKind {
	if busy {
		return w.busyKinds
	}
	return w.kinds
}

// pods is how many pods the workload runs on n nodes: at most maxPods,
// and at most half of what the free GPUs hold, so that the last pods do
// not measure a full fleet (a packed 90% fleet's 8-GPU pods may take every
// free node: there are few of them).
func (w workload) pods(n, maxPods int, busy bool) int {
	kinds := w.kindsFor(busy)
	// GPUs a round of kinds takes; a partition is 1/7 of a GPU.
	var perRound float64
	for _, k := range kinds {
		switch k {
		case kindGPU:
			perRound++
		case kindGPU8:
			perRound += gpusPerNode
		case kindMIG:
			perRound += 1.0 / 7
		}
	}
	free := float64(n * gpusPerNode)
	share := 0.5
	if busy {
		free *= 0.1
		if w.busyPacked {
			share = 1
		}
	}
	p := int(free * share / perRound * float64(len(kinds)))
	return max(1, min(p, maxPods))
}

const driverName = "gpu.gpudra.io"

// claimSpec is what a pod of the kind asks for.
func claimSpec(k claimKind) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu.gpudra.io",
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}}
	var spec resourceapi.ResourceClaimSpec
	switch k {
	case kindGPU8:
		req.Exactly.Count = gpusPerNode
		island := resourceapi.FullyQualifiedName(driverName + "/nvlinkGroup")
		spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &island}}
	case kindMIG:
		req.Exactly.DeviceClassName = "mig-1g.10gb.gpudra.io"
	}
	spec.Devices.Requests = []resourceapi.DeviceRequest{req}
	return spec
}

// pod is a pod using one claim by name; it never runs (no kubelet).
func pod(namespace, name, claim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10.1",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// busyClaim is an allocated claim that holds GPUs 0..count-1 of a node:
// how the benchmark fills the fleet without scheduling thousands of pods.
// The scheduler counts every allocated claim's devices as taken, reserved
// by a pod or not.
func busyClaim(namespace, node string, count int) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "busy-" + node},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "busy", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu.gpudra.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(count),
			},
		}}}},
	}
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	for g := range count {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "busy", Driver: driverName, Pool: node, Device: gpu.WholeDeviceName(g),
		})
	}
	claim.Status.Allocation = alloc
	return claim
}

// busyGPUs is how many GPUs of node i (0-based) the 90% state takes: GPUs
// 0-6 everywhere and GPU 7 on every fifth node (spread: 80% of the nodes
// keep one free GPU), or every GPU of nine nodes in ten (packed: one node
// in ten is empty).
func busyGPUs(i int, packed bool) int {
	if packed {
		if i%10 == 9 {
			return 0
		}
		return gpusPerNode
	}
	if i%5 == 4 {
		return gpusPerNode
	}
	return gpusPerNode - 1
}

func nodeName(i int) string { return fmt.Sprintf("fleet-%04d", i) }
