package simulate

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func TestDefaultClaimSpec(t *testing.T) {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: "plain", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}},
		{Name: "all", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: resourceapi.DeviceAllocationModeAll}},
		{Name: "three", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", Count: 3}},
		{Name: "first", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: "c"}}},
	}}}
	DefaultClaimSpec(&spec)
	r := spec.Devices.Requests
	if r[0].Exactly.AllocationMode != resourceapi.DeviceAllocationModeExactCount || r[0].Exactly.Count != 1 {
		t.Errorf("plain request defaulted to %s/%d, want ExactCount/1", r[0].Exactly.AllocationMode, r[0].Exactly.Count)
	}
	if r[1].Exactly.Count != 0 {
		t.Errorf("All request got count %d, want none", r[1].Exactly.Count)
	}
	if r[2].Exactly.Count != 3 || r[2].Exactly.AllocationMode != resourceapi.DeviceAllocationModeExactCount {
		t.Errorf("count 3 request became %s/%d", r[2].Exactly.AllocationMode, r[2].Exactly.Count)
	}
	if sub := r[3].FirstAvailable[0]; sub.AllocationMode != resourceapi.DeviceAllocationModeExactCount || sub.Count != 1 {
		t.Errorf("subrequest defaulted to %s/%d, want ExactCount/1", sub.AllocationMode, sub.Count)
	}
}
