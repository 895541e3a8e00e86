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
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/migrate"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// TestNVIDIADemos measures what the "done when" asks: migrate then
// check over NVIDIA's published demo specs gives the verdict a gpudra
// cluster would. Point GPUDRA_NVIDIA_DEMOS at a directory holding a
// checkout's demo/specs and tests/bats/specs
// (github.com/kubernetes-sigs/dra-driver-nvidia-gpu, formerly
// NVIDIA/k8s-dra-driver-gpu; its files are not copied here, and
// docs/hardware.md records the last run: commit, date, counts);
// every file is migrated, checked on a fake DGX H100 (what asks for IMEX
// channels: on DGX H100 nodes in two NVLink domains, nvlinkOptions), and, where check
// finds nothing the API server rejects, run through gpudra simulate (the
// real kubelet plugin and scheduler allocator) to compare verdicts, as
// TestCheckAgreesWithSimulate does for the corpus.
func TestNVIDIADemos(t *testing.T) {
	dir := os.Getenv("GPUDRA_NVIDIA_DEMOS")
	if dir == "" {
		t.Skip("set GPUDRA_NVIDIA_DEMOS to a directory holding demo/specs and tests/bats/specs of kubernetes-sigs/dra-driver-nvidia-gpu")
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	apiKinds := []FindingKind{FindingInvalid, FindingNotServed, FindingNoCRD}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := migrate.Files([]scheduler.File{{Name: rel, Data: data}}, migrate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in := &scheduler.Manifests{}
			if err := in.Add(rel, res.Files[0].Data); err != nil {
				t.Logf("VERDICT %s unusable-input %v", rel, err)
				return
			}
			cc := corpusCase{profile: "dgx-h100", shareSharing: "None"}
			opts := cc.options(t, Options{Inputs: in})
			// What migrate made of NVIDIA's IMEX demos asks for IMEX
			// channels: checked on nodes in NVLink domains, which
			// simulate's fake nodes do not have yet.
			nvlink := bytes.Contains(res.Files[0].Data, []byte("deviceClassName: nvlink-"))
			if nvlink {
				opts = nvlinkOptions(t, in, true)
			}
			rep, err := Run(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			apiRejects := false
			for _, fd := range rep.Findings {
				if fd.Severity == SeverityError {
					kinds = append(kinds, string(fd.Kind))
					apiRejects = apiRejects || slices.Contains(apiKinds, fd.Kind)
				}
			}
			slices.Sort(kinds)
			kinds = slices.Compact(kinds)
			verdict := "simulate:skip(api-rejects)"
			if nvlink {
				verdict = "simulate:skip(nvlink-domains)"
			}
			if !apiRejects && !nvlink {
				ctx, c := startSimulate(t, cc)
				verdict = "simulate:" + agree(ctx, t, c, cc, in)
				if t.Failed() {
					verdict += "(DISAGREES)"
				}
			}
			t.Logf("VERDICT %s migrate-unmigrated=%d check-exit=%d errors=%v %s", rel, res.Unmigrated(), rep.ExitCode, kinds, verdict)
		})
	}
}
