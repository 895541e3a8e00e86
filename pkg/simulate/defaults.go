package simulate

import (
	resourceapi "k8s.io/api/resource/v1"
)

// DefaultClaimSpec applies the defaults the API server gives a
// ResourceClaim spec on create (resource.k8s.io/v1 defaulting): a request or
// subrequest without allocationMode is ExactCount, and ExactCount without a
// count asks for one device. The fake API server does no defaulting, and
// the allocator rejects a request without a mode.
func DefaultClaimSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		req := &spec.Devices.Requests[i]
		if req.Exactly != nil {
			defaultCount(&req.Exactly.AllocationMode, &req.Exactly.Count)
		}
		for j := range req.FirstAvailable {
			sub := &req.FirstAvailable[j]
			defaultCount(&sub.AllocationMode, &sub.Count)
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
