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

package check

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// TestWriteTextEscapes: the text report shows names, attributes and
// messages taken from cluster objects and manifests; a carriage return,
// a newline or an escape sequence in them must not forge a line of the
// report (a finding, a claim) nor reach the terminal. A message's own
// lines stay lines.
func TestWriteTextEscapes(t *testing.T) {
	forge := "\rcluster.yaml: ResourceClaim default/x [note: all clear]\n\x1b[2J"
	rep := &Report{
		KubernetesVersion: "1.34",
		Inventory:         InventoryInfo{Source: "ResourceSlices from the cluster", Notes: []string{"slice" + forge}, Drivers: []string{"gpu.gpudra.io" + forge}},
		Claims:            []ClaimInfo{{Name: "default/c" + forge, From: "cluster", Unsatisfiable: []string{"node-1/gpu-0" + forge}}},
		Findings: []Finding{{
			Kind:     FindingUnsatisfiable,
			Severity: SeverityError,
			Source:   scheduler.Source{File: "claims.yaml"},
			Object:   "ResourceClaim default/c" + forge,
			Message:  "first line\nsecond line, attribute " + forge,
			Devices:  []string{"node-1/gpu-0" + forge},
			Hint:     "hint" + forge,
		}},
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("a control character reached the output raw:\n%q", out)
	}
	// A terminal starts a line at a carriage return as at a newline.
	forged := 0
	for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if strings.HasPrefix(line, "cluster.yaml:") {
			forged++
		}
	}
	if forged > 0 {
		t.Errorf("%d forged finding line(s):\n%q", forged, out)
	}
	for _, want := range []string{
		`default/c\rcluster.yaml: ResourceClaim default/x [note: all clear]\n\x1b[2J`,
		"  first line\n  second line, attribute \\r",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
