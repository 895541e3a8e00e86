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

package v1alpha1

import "fmt"

// ForDevice returns the configuration one device gets from the opaque
// parameters that apply to it, lowest precedence first (the DeviceClass's,
// then the claim's, each in order), each already accepted by Decode (so
// that its errors name the config it is in): merged field by field
// (MergeParameters) and decoded, or the default for the device's kind when
// there are none. A GpuConfig configures whole GPUs, a MigConfig MIG
// partitions; a config of the other kind is an error that says which kind
// to use. The kubelet plugin applies this at prepare, and gpudra check to
// the devices it allocates, so that both fail alike.
func ForDevice(layers [][]byte, mig bool) (Config, error) {
	var effective Config
	if len(layers) > 0 {
		merged, err := MergeParameters(layers...)
		if err == nil {
			effective, err = Decode(merged)
		}
		if err != nil {
			return nil, fmt.Errorf("the configs that apply to the device do not merge: %w", err)
		}
	}
	switch {
	case effective == nil && mig:
		return NewMigConfig(), nil
	case effective == nil:
		return NewGpuConfig(), nil
	}
	kind := effective.GetObjectKind().GroupVersionKind().Kind
	switch _, isMig := effective.(*MigConfig); {
	case mig && !isMig:
		return nil, fmt.Errorf("the device is a MIG partition, but the config that applies to it is a %s; use kind MigConfig for MIG partitions (and limit GpuConfig to the whole-GPU requests)", kind)
	case !mig && isMig:
		return nil, fmt.Errorf("the device is a whole GPU, but the config that applies to it is a %s; use kind GpuConfig for whole GPUs", kind)
	}
	return effective, nil
}
