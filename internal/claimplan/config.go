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
	"fmt"
	"sort"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// DecodeConfig decodes one opaque config of the driver as the plugin does
// at prepare (configapi.Decode: strict, defaulted, validated), and refuses
// what no allocation could make work: a perDevicePinnedMemoryLimits key
// that can never name the claim's MPS device. A claim has at most one MPS
// device (see planSharing), which its containers see as CUDA ordinal "0";
// a whole GPU may also be keyed by its UUID, a MIG device (which gets a
// new UUID each time it is created) not. The admission webhook, gpudra
// check and the plugin all decode through it.
func DecodeConfig(raw []byte) (configapi.Config, error) {
	cfg, err := configapi.Decode(raw)
	if err != nil {
		return nil, err
	}
	sh := sharingOf(cfg)
	if !sh.IsMPS() || sh.MPS == nil {
		return cfg, nil
	}
	_, mig := cfg.(*configapi.MigConfig)
	keys := make([]string, 0, len(sh.MPS.PerDevicePinnedMemoryLimits))
	for k := range sh.MPS.PerDevicePinnedMemoryLimits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if key == "0" || !mig && isGPUUUID(key) {
			continue
		}
		fix := `"0" (the claim's one MPS device) or the UUID of the GPU ("GPU-…")`
		if mig {
			fix = `"0" (the claim's one MPS device; a MIG device gets a new UUID each time it is created)`
		}
		return nil, &Refusal{Kind: MPSLimitKey, Msg: fmt.Sprintf(
			"parameters.sharing.mps.perDevicePinnedMemoryLimits[%s]: key %q can never name the claim's MPS device: gpudra runs MPS on one device per claim, so the only keys are %s; to limit every device, use defaultPinnedDeviceMemoryLimit",
			key, key, fix)}
	}
	return cfg, nil
}

func isGPUUUID(key string) bool {
	return len(key) > len("GPU-") && key[:len("GPU-")] == "GPU-"
}
