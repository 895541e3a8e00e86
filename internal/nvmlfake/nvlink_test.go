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

func TestNVLinkIslands(t *testing.T) {
	s := start(t, "mixed", "n", "")
	island := []int{0, 0, 0, 0, 1, 1, 1, 1, -1}
	for i := range island {
		for j := range island {
			if i == j {
				continue
			}
			want := nvml.P2P_STATUS_NOT_SUPPORTED
			if island[i] >= 0 && island[i] == island[j] {
				want = nvml.P2P_STATUS_OK
			}
			// Both spellings: the device method and the library function.
			got, ret := device(t, s, i).GetP2PStatus(device(t, s, j), nvml.P2P_CAPS_INDEX_NVLINK)
			got2, ret2 := s.DeviceGetP2PStatus(device(t, s, i), device(t, s, j), nvml.P2P_CAPS_INDEX_NVLINK)
			if got != want || ret != nvml.SUCCESS || got2 != want || ret2 != nvml.SUCCESS {
				t.Errorf("P2P NVLink %d→%d = %v/%v, %v/%v; want %v", i, j, got, ret, got2, ret2, want)
			}
		}
	}
}

func TestNVLinkState(t *testing.T) {
	s := start(t, "mixed", "n", "")
	tests := []struct {
		gpu, link int
		want      nvml.EnableState
		ret       nvml.Return
	}{
		{0, 0, nvml.FEATURE_ENABLED, nvml.SUCCESS},
		{0, 17, nvml.FEATURE_ENABLED, nvml.SUCCESS},
		{0, 18, nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT}, // H100 has 18 links
		{4, 11, nvml.FEATURE_ENABLED, nvml.SUCCESS},
		{4, 12, nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT}, // A100 has 12
		{8, 0, nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED},     // L4: PCIe only
	}
	for _, tc := range tests {
		got, ret := device(t, s, tc.gpu).GetNvLinkState(tc.link)
		if got != tc.want || ret != tc.ret {
			t.Errorf("GPU %d link %d: %v, %v; want %v, %v", tc.gpu, tc.link, got, ret, tc.want, tc.ret)
		}
	}
}

func TestPCIeP2P(t *testing.T) {
	s := start(t, "mixed", "n", "")
	// GPUs 6 and 7 share a root complex; 7 and 8 do not.
	if st, _ := device(t, s, 6).GetP2PStatus(device(t, s, 7), nvml.P2P_CAPS_INDEX_PCI); st != nvml.P2P_STATUS_OK {
		t.Errorf("PCI P2P 6→7 = %v", st)
	}
	if st, _ := device(t, s, 7).GetP2PStatus(device(t, s, 8), nvml.P2P_CAPS_INDEX_READ); st != nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED {
		t.Errorf("P2P read 7→8 = %v", st)
	}
}
