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

package discovery

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// coresPerSM is the number of CUDA cores in one streaming multiprocessor
// of a compute capability; 0 where it is not known.
func coresPerSM(major, minor int) int {
	switch {
	case major == 5:
		return 128
	case major == 6 && minor == 0:
		return 64
	case major == 6:
		return 128
	case major == 7:
		return 64
	case major == 8 && minor == 0:
		return 64
	case major == 8:
		return 128 // 8.6, 8.7, 8.9
	case major == 9, major == 10, major == 12:
		return 128
	default:
		return 0
	}
}

// multiprocessors derives the SM count from the core count. NVML cannot
// count cores while MIG is on ("use the GPU instance profiles"), so then
// it is the SM count of the largest GPU instance profile: what MIG can
// hand out. Otherwise a GPU that cannot tell has 0.
func multiprocessors(ctx context.Context, d nvml.Device, major, minor int, migEnabled bool) (int, error) {
	cores, ret := d.GetNumGpuCores()
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED:
		if migEnabled {
			return largestInstanceSMs(d)
		}
		return 0, nil
	default:
		return 0, fmt.Errorf("get core count: %w", ret)
	}
	per := coresPerSM(major, minor)
	if per == 0 {
		klog.FromContext(ctx).Info("Unknown cores per multiprocessor; reporting none", "computeCapability", fmt.Sprintf("%d.%d", major, minor))
		return 0, nil
	}
	return cores / per, nil
}

// largestInstanceSMs is the largest SM count of the GPU's instance
// profiles.
func largestInstanceSMs(d nvml.Device) (int, error) {
	most := 0
	for p := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := d.GetGpuInstanceProfileInfo(p)
		switch ret {
		case nvml.SUCCESS:
			most = max(most, int(info.MultiprocessorCount))
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
		default:
			return 0, fmt.Errorf("get GPU instance profile %d: %w", p, ret)
		}
	}
	return most, nil
}
