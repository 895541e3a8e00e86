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
	"github.com/gpudra/gpudra/internal/gpu"
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
	if rep.Passed || rep.Profile != "dgx-h100" || len(rep.Steps) != 8 {
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

// TestRunFabric: the report shows each GPU's NVLink fabric and platform
// reading and where the node stands: a DGX H100 in no multi-node fabric
// (the driver's COMPLETED with a zero cluster UUID), a GB200 tray in its
// domain.
func TestRunFabric(t *testing.T) {
	for _, tc := range []struct {
		fake, summary, gpu0 string
	}{
		{"dgx-h100", "no multi-node NVLink fabric",
			"gpu-0: fabric COMPLETED, status SUCCESS, cluster UUID 00000000-0000-0000-0000-000000000000, clique 0, health not reported; platform: not reported"},
		{"gb200-tray", "NVLink domain 00000001-0000-0000-0000-000000000001.2",
			`gpu-0: fabric COMPLETED, status SUCCESS, cluster UUID 00000001-0000-0000-0000-000000000001, clique 2, health HEALTHY; platform: chassis "1820000000001", slot 14, tray 4, host 1, module ID 2`},
	} {
		t.Run(tc.fake, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{
				Backend: backend.Options{Kind: "fake", FakeProfile: tc.fake, NodeName: "n", CDIHookPath: "/bin/sh"},
				Health:  50 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			var fabric *Step
			for i := range rep.Steps {
				if strings.HasPrefix(rep.Steps[i].Name, "NVLink fabric") {
					fabric = &rep.Steps[i]
				}
			}
			if fabric == nil || fabric.Summary != tc.summary || len(fabric.Details) == 0 || fabric.Details[0] != tc.gpu0 {
				t.Fatalf("fabric step %+v", fabric)
			}
			if !rep.Passed {
				t.Errorf("the check of fake %s failed: %+v", tc.fake, rep.Steps)
			}
		})
	}
}

// TestRunMatch: the GPUs are compared with the built-in profile of the
// same models in the same number, else model by model with the fake
// catalog, whatever their number; either way fake GPUs match themselves.
func TestRunMatch(t *testing.T) {
	for _, tc := range []struct {
		name, fake, profile, why string
	}{
		{"8 H200 of a DGX: its profile", "dgx-h200", "dgx-h200", "its 8 GPU(s) are the same models"},
		{"mixed: its profile", "mixed", "mixed", "its 9 GPU(s) are the same models"},
		{"one H200: per model", "testdata/one-h200.yaml", "per model: h200-sxm5-141gb",
			"no built-in profile has these 1 GPU(s) (NVIDIA H200)"},
		{"one L4: per model", "testdata/one-l4.yaml", "per model: l4", "(NVIDIA L4)"},
		{"models of mixed, other numbers: per model", "testdata/h100-l4.yaml", "per model: h100-sxm5-80gb, h100-sxm5-80gb, l4",
			"each is compared with the fake catalog's GPU of its model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{
				Backend: backend.Options{Kind: "fake", FakeProfile: tc.fake, NodeName: "n", CDIHookPath: "/bin/sh"},
				Health:  50 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			cmp := rep.Steps[2]
			if rep.Profile != tc.profile || cmp.Result != Pass || !strings.Contains(cmp.Summary, tc.why) || !rep.Passed {
				t.Errorf("profile %q (want %q), passed %v, compare step: %+v", rep.Profile, tc.profile, rep.Passed, cmp)
			}
		})
	}
}

// TestPerModel: the per-model profile keeps each GPU's MIG mode and
// NVLink island, drops islands of one, and names the models the catalog
// lacks.
func TestPerModel(t *testing.T) {
	node := gpu.Node{DriverVersion: "580.159.04", CUDADriverVersion: "13.0", GPUs: []gpu.GPU{
		{ProductName: "NVIDIA H200", MigEnabled: true, NVLinkGroup: 0},
		{ProductName: "NVIDIA H200", NVLinkGroup: 0},
		{ProductName: "NVIDIA L4", NVLinkGroup: 2},
		{ProductName: "NVIDIA Imaginary 9000", NVLinkGroup: 3},
	}}
	pf, keys, missing := perModel(node)
	if got := strings.Join(keys, ","); got != "h200-sxm5-141gb,h200-sxm5-141gb,l4" {
		t.Errorf("models %s", got)
	}
	if len(missing) != 1 || missing[0] != "NVIDIA Imaginary 9000" {
		t.Errorf("missing %v", missing)
	}
	if pf.DriverVersion != "580.159.04" || pf.CUDADriverVersion != "13.0" || len(pf.GPUs) != 3 {
		t.Fatalf("profile %+v", pf)
	}
	if g := pf.GPUs[0]; !g.MigEnabled || g.NVLinkIsland == nil || *g.NVLinkIsland != 0 {
		t.Errorf("GPU 0: %+v", g)
	}
	if g := pf.GPUs[2]; g.MigEnabled || g.NVLinkIsland != nil {
		t.Errorf("GPU 2 (alone in its NVLink group): %+v", g)
	}
}
