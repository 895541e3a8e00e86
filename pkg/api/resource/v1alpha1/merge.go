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

import (
	"encoding/json"
	"fmt"
	"maps"
)

// MergeParameters layers opaque parameters that apply to one device, lowest
// precedence first (a DeviceClass's before the claim's), into one: a
// top-level field set in a later one replaces that field of the earlier
// ones, and fields a later one leaves out are kept. So a DeviceClass can
// fix the sharing tier while a claim picks its driver capabilities, and a
// claim that sets sharing replaces the class's sharing as a whole.
//
// Parameters of another kind than the previous ones replace them
// entirely: a MigConfig has nothing to inherit from a GpuConfig.
//
// Each input must already have passed Decode, so that errors name the
// config they came from; the result is then decoded (and defaulted and
// validated) like any other parameters. A config that applies alone is
// returned unchanged.
func MergeParameters(raws ...[]byte) ([]byte, error) {
	switch len(raws) {
	case 0:
		return nil, nil
	case 1:
		return raws[0], nil
	}
	var merged map[string]json.RawMessage
	for i, raw := range raws {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("parameters %d of %d: %w", i+1, len(raws), err)
		}
		if merged == nil || kindOf(obj) != kindOf(merged) {
			merged = obj
			continue
		}
		maps.Copy(merged, obj)
	}
	return json.Marshal(merged)
}

func kindOf(obj map[string]json.RawMessage) string {
	var kind string
	_ = json.Unmarshal(obj["kind"], &kind)
	return kind
}
