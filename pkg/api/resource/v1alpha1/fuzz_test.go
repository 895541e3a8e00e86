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
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary parameters to the decoder the plugin, gpudra
// check and the admission controller share. Whatever the input: no panic,
// and whatever Decode accepts is valid, stays the same when defaulted
// again, and reads back as the same config after being written out (the
// checkpoint stores configs that way). The seed corpus in
// testdata/fuzz/FuzzDecode runs in every `go test`; `make fuzz` searches.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = DecodeNonStrict(raw)
		cfg, err := Decode(raw)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Decode returned a config with an error: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Decode accepted %q, which does not validate: %v", raw, err)
		}
		again := cfg.DeepCopyObject().(Config)
		again.Default()
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("Default is not idempotent on %q:\n%#v\n%#v", raw, cfg, again)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("encode %#v: %v", cfg, err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode accepted %q but not its own encoding %s: %v", raw, out, err)
		}
		if !reflect.DeepEqual(normalized(t, back), normalized(t, cfg)) {
			t.Fatalf("round trip of %q through %s changed the config", raw, out)
		}
	})
}

// FuzzMergeParameters: two configs that each pass Decode merge into one
// that passes Decode too, so a DeviceClass's and a claim's configs that
// gpudra check accepts one by one never fail together on the node.
func FuzzMergeParameters(f *testing.F) {
	f.Fuzz(func(t *testing.T, class, claim []byte) {
		if _, err := Decode(class); err != nil {
			return
		}
		if _, err := Decode(claim); err != nil {
			return
		}
		merged, err := MergeParameters(class, claim)
		if err != nil {
			t.Fatalf("merge %q and %q: %v", class, claim, err)
		}
		if _, err := Decode(merged); err != nil {
			t.Fatalf("%q and %q each decode, their merge %s does not: %v", class, claim, merged, err)
		}
	})
}

// normalized compares configs by their JSON: quantities that are equal can
// differ in their cached string form.
func normalized(t *testing.T, c Config) string {
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
