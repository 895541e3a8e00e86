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

package gpucheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpudra/gpudra/internal/backend"
)

// TestRunDifferences: GPUs unlike the profile compared with fail the
// check, with the differences listed; the other steps still run.
func TestRunDifferences(t *testing.T) {
	rep, err := Run(context.Background(), Options{
		Backend: backend.Options{Kind: "fake", FakeProfile: "dgx-a100", NodeName: "n", CDIHookPath: "/bin/sh"},
		Compare: "dgx-h100", Health: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed || rep.Profile != "dgx-h100" || len(rep.Steps) != 7 {
		t.Fatalf("report: passed %v, profile %q, %d steps", rep.Passed, rep.Profile, len(rep.Steps))
	}
	cmp := rep.Steps[2]
	if cmp.Result != Fail || !strings.Contains(strings.Join(cmp.Details, "\n"), `productName is "NVIDIA A100-SXM4-40GB" here`) {
		t.Errorf("compare step: %+v", cmp)
	}
	for _, s := range rep.Steps[3:] {
		if s.Result == Fail {
			t.Errorf("step %q failed: %s", s.Name, s.Summary)
		}
	}
}

// TestRunNoProfile: GPUs no built-in profile has are reported, not failed.
func TestRunNoProfile(t *testing.T) {
	rep, err := Run(context.Background(), Options{
		Backend: backend.Options{Kind: "fake", FakeProfile: "testdata/one-l4.yaml", NodeName: "n", CDIHookPath: "/bin/sh"},
		Health:  50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cmp := rep.Steps[2]; cmp.Result != Info || !strings.Contains(cmp.Summary, "no fake profile has these GPUs (NVIDIA L4)") || !rep.Passed {
		t.Errorf("compare step: %+v, passed %v", cmp, rep.Passed)
	}
}
