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

package nvmlfake

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestAdminMIG: the admin's instance is made through NVML, so the GPU's
// placement rules hold for it as for the plugin's.
func TestAdminMIG(t *testing.T) {
	s := start(t, "dgx-h100", "node-1", t.TempDir())
	const gi3, ci3 = nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE
	for _, tc := range []struct {
		name        string
		index       int
		start, size uint32
		wantErr     bool
	}{
		{name: "3g.40gb at memory slices 4-7", index: 1, start: 4, size: 4},
		{name: "the same placement again overlaps it", index: 1, start: 4, size: 4, wantErr: true},
		{name: "3g.40gb at slice 1 is no valid placement", index: 2, start: 1, size: 4, wantErr: true},
		{name: "no GPU 8 on a DGX H100", index: 8, start: 0, size: 4, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := AdminMIG(s, tc.index, gi3, ci3, tc.start, tc.size)
			if (err != nil) != tc.wantErr {
				t.Fatalf("AdminMIG: %v, want error %v", err, tc.wantErr)
			}
		})
	}
	gis, ret := device(t, s, 1).GetGpuInstances(profileInfo(t, device(t, s, 1), gi3))
	if ret != nvml.SUCCESS || len(gis) != 1 {
		t.Fatalf("GPU 1 holds %d 3g.40gb instances (%v), want the admin's one", len(gis), ret)
	}
	info, ret := gis[0].GetComputeInstanceProfileInfo(ci3, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	cis, ret := gis[0].GetComputeInstances(&info)
	if ret != nvml.SUCCESS || len(cis) != 1 {
		t.Errorf("the admin's instance holds %d compute instances (%v), want 1", len(cis), ret)
	}
}
