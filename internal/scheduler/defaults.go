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

package scheduler

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DefaultClaimSpec applies the defaults the API server gives a
// ResourceClaim spec on create (resource.k8s.io/v1 defaulting): a request
// or subrequest without allocationMode is ExactCount, ExactCount without a
// count asks for one device, and a toleration without an operator is
// Equal. The allocator relies on them: it rejects a request without a
// mode.
func DefaultClaimSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		req := &spec.Devices.Requests[i]
		if req.Exactly != nil {
			defaultCount(&req.Exactly.AllocationMode, &req.Exactly.Count)
			defaultTolerations(req.Exactly.Tolerations)
		}
		for j := range req.FirstAvailable {
			sub := &req.FirstAvailable[j]
			defaultCount(&sub.AllocationMode, &sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

func defaultCount(mode *resourceapi.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultTolerations(tols []resourceapi.DeviceToleration) {
	for i := range tols {
		if tols[i].Operator == "" {
			tols[i].Operator = resourceapi.DeviceTolerationOpEqual
		}
	}
}

// DefaultPod applies the API server's default that matters to the
// scheduler's DRA plugin: a container resource with a limit but no
// request requests its limit (for extended resources, requests must equal
// limits, so a pod usually sets only limits).
func DefaultPod(pod *v1.Pod) {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; ok {
					continue
				}
				if r.Requests == nil {
					r.Requests = v1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
}
