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
