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

package claimplan

import (
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestCheckWithinClaim(t *testing.T) {
	g0 := gpu.GPU{Minor: 0, UUID: "GPU-0"}
	g1 := gpu.GPU{Minor: 1, UUID: "GPU-1"}
	share := func(id string) *types.UID { u := types.UID(id); return &u }
	whole := func(req string, g gpu.GPU) Device {
		return Device{Result: resourceapi.DeviceRequestAllocationResult{Request: req, Device: g.DeviceName()}, GPU: g}
	}
	mig := func(req string, g gpu.GPU, start, size int) Device {
		md := gpu.MigDevice{Parent: g, Profile: gpu.MigProfile{Name: "p"}, Placement: gpu.MigPlacement{Start: start, Size: size}}
		return Device{Result: resourceapi.DeviceRequestAllocationResult{Request: req, Device: md.Name()}, GPU: g, Mig: &md}
	}
	admin := func(p Device) Device { yes := true; p.Result.AdminAccess = &yes; return p }
	shared := func(p Device, id string) Device { p.Result.ShareID = share(id); return p }

	tests := []struct {
		name    string
		planned []Device
		wantErr string
	}{
		{name: "different GPUs", planned: []Device{whole("a", g0), whole("b", g1)}},
		{name: "partitions side by side", planned: []Device{mig("a", g0, 0, 1), mig("b", g0, 1, 1), mig("c", g0, 2, 2)}},
		{name: "same partition on two GPUs", planned: []Device{mig("a", g0, 0, 1), mig("b", g1, 0, 1)}},
		{name: "GPU twice", planned: []Device{whole("a", g0), whole("b", g0)}, wantErr: `device "gpu-0" is allocated twice, to request "a" and to request "b"`},
		{name: "GPU and its partition", planned: []Device{whole("a", g0), mig("b", g0, 3, 1)}, wantErr: `device "gpu-0-mig-p-3" (request "b") is a partition of device "gpu-0" (request "a")`},
		{name: "partition and its GPU", planned: []Device{mig("a", g0, 3, 1), whole("b", g0)}, wantErr: `device "gpu-0-mig-p-3" (request "a") is a partition of device "gpu-0" (request "b")`},
		{name: "overlap", planned: []Device{mig("a", g0, 0, 4), mig("b", g0, 3, 1)}, wantErr: `devices "gpu-0-mig-p-0" (request "a") and "gpu-0-mig-p-3" (request "b") overlap: both use memory slices of GPU gpu-0 (0-3 and 3-3)`},
		{name: "admin access may overlap", planned: []Device{whole("a", g0), admin(whole("b", g0)), admin(mig("c", g0, 0, 1))}},
		{name: "two shares of one device", planned: []Device{shared(whole("a", g0), "s1"), shared(whole("b", g0), "s2")}},
		{name: "one share twice", planned: []Device{shared(whole("a", g0), "s1"), shared(whole("b", g0), "s1")}, wantErr: "allocated twice"},
		{name: "a share beside the device itself", planned: []Device{shared(whole("a", g0), "s1"), whole("b", g0)}, wantErr: "allocated twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWithinClaim(tc.planned)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("checkWithinClaim = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || kindOf(err) != OverlapWithinClaim {
				t.Fatalf("checkWithinClaim = %v\nwant a refusal %s saying %s", err, OverlapWithinClaim, tc.wantErr)
			}
		})
	}
}

func kindOf(err error) Kind {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Kind
	}
	return ""
}
