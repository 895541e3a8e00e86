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
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// TestExplainAllWholeGPUsHeld: when sequential claims hold every whole GPU
// of the node, the claim that no longer fits is told so — all N whole
// GPUs held, and by which claims — not only which claim holds the one GPU
// whose free MIG partitions a broad class also matches, nor counter names
// (issue 18: "a 9th claim on a broad class gets 'counters exhausted:
// 1g10gbme-instances' instead of 'all whole GPUs are held'").
func TestExplainAllWholeGPUsHeld(t *testing.T) {
	const broad = "device.driver == 'gpu.gpudra.io'"
	for _, tc := range []struct {
		name    string
		class   string // the claims' class: a broad one of our own, or a built-in
		claims  int
		want    []string // in the last claim's reasons
		wantNot []string
	}{{
		name:   "broad class, ninth claim",
		class:  "any-gpudra-device",
		claims: 9,
		want: []string{
			"all 8 whole GPUs on node-1 are held by earlier claims",
			"default/job-0 (gpu-0)", "default/job-3 (gpu-3)", "default/job-7 (gpu-7)",
		},
		wantNot: []string{"the one GPU (counter set)", "counters exhausted"},
	}, {
		name:   "whole-GPU class, ninth claim",
		class:  "gpu.gpudra.io",
		claims: 9,
		want:   []string{"earlier claims hold the rest"},
	}, {
		name:   "broad class, eight claims fit",
		class:  "any-gpudra-device",
		claims: 8,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: any-gpudra-device}\nspec:\n  selectors:\n  - cel: {expression: %q}\n", broad)
			for i := range tc.claims {
				fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: job-%d, namespace: default}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: %s}\n", i, tc.class)
			}
			in := &scheduler.Manifests{}
			if err := in.Add("claims.yaml", []byte(b.String())); err != nil {
				t.Fatal(err)
			}
			cc := corpusCase{profile: fakenodes.DefaultProfile, sequential: true, shareSharing: "MPS"}
			rep, err := Run(context.Background(), cc.options(t, Options{Inputs: in}))
			if err != nil {
				t.Fatal(err)
			}
			why := strings.Join(claim(t, rep, fmt.Sprintf("default/job-%d", tc.claims-1)).Unsatisfiable, " ")
			if len(tc.want) == 0 && why != "" {
				t.Fatalf("last claim should fit: %s", why)
			}
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("reasons lack %q:\n%s", w, why)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(why, w) {
					t.Errorf("reasons still say %q:\n%s", w, why)
				}
			}
		})
	}
}
