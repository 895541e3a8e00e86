//go:build cgo

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

package main

import (
	"strings"
	"testing"
)

// TestCheckMigProfiles: --mig-profiles models a plugin that publishes only
// some MIG profiles, as its flag of the same name.
func TestCheckMigProfiles(t *testing.T) {
	claim := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: small}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.gpudra.io
        selectors:
        - cel:
            expression: device.attributes['gpu.gpudra.io'].profile == '1g.10gb'
`
	for _, tt := range []struct {
		flag string
		exit int
	}{
		{"all", 0},
		{"1g.10gb,7g.80gb", 0},
		{"3g.40gb", 1},
		{"none", 1},
	} {
		code, out, errOut := runCLI(t, claim, "--mig-profiles", tt.flag, "-")
		if code != tt.exit {
			t.Errorf("--mig-profiles %s: exit %d, want %d\n%s%s", tt.flag, code, tt.exit, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, claim, "--mig-profiles", "1g.10gb,,x", "-"); code != 2 || !strings.Contains(errOut, "--mig-profiles") {
		t.Errorf("a malformed list: exit %d, %q", code, errOut)
	}
}
