//go:build e2e

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

package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/dryrun"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// checkAgreesWithAPIServer: what gpudra check says the API server (with
// gpudra's webhook) rejects, this cluster's API server rejects, and what
// it says it accepts, it accepts. The corpus cases of API validation go
// through a server-side dry run (internal/dryrun, gpudra check
// --server-dry-run), object by object; nothing is stored.
func (e *env) checkAgreesWithAPIServer(ctx context.Context, t *testing.T) {
	corpus := filepath.Join("..", "internal", "check", "testdata", "corpus")
	files := []string{"invalid-names.yaml", "allocation-mode-all-count.yaml", "msg-match-attribute-empty.yaml",
		"v1beta1-demo.yaml", "v1alpha3-objects.yaml", "mps-limit-key.yaml", "misspelt-config.yaml", "msg-claim-source.yaml",
		"extended-resource-invalid.yaml"}
	start := time.Now()
	for _, name := range files {
		in, err := scheduler.LoadPaths([]string{filepath.Join(corpus, name)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := check.Run(ctx, check.Options{Inputs: in, BuiltinClasses: true, DriverName: e.driver})
		if err != nil {
			t.Fatal(err)
		}
		offline := map[string]bool{}
		for _, f := range rep.Findings {
			if f.Severity == check.SeverityError && apiLevel(f) {
				offline[f.Object] = true
			}
		}
		// The webhook may still be starting: a dry run it cannot answer
		// is retried.
		var server map[string]bool
		if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			found, err := dryrun.Apply(ctx, e.cfg, in)
			if err != nil {
				return false, err
			}
			server = map[string]bool{}
			for _, f := range found {
				if f.Severity == check.SeverityError {
					server[f.Object] = true
				}
			}
			return true, nil
		}); err != nil {
			t.Fatalf("%s: dry run: %v", name, err)
		}
		if got, want := slices.Sorted(maps.Keys(offline)), slices.Sorted(maps.Keys(server)); !slices.Equal(got, want) {
			t.Errorf("%s: gpudra check says the API server rejects %v; its dry run rejects %v", name, got, want)
		}
		t.Logf("%s: both reject %v", name, slices.Sorted(maps.Keys(server)))
	}
	record(t, t.Name()+": check and the API server's dry run over the validation corpus", time.Since(start))
}

// apiLevel says whether a finding is about what the API server (and
// gpudra's webhook, which decodes configs as the plugin does) rejects, as
// opposed to what the scheduler or the plugin does later.
func apiLevel(f check.Finding) bool {
	switch f.Kind {
	case check.FindingInvalid, check.FindingUnknownField, check.FindingNotServed, check.FindingInvalidExtendedResource:
		return true
	case check.FindingInvalidConfig:
		return f.Refusal != string(claimplan.ConfigKind)
	}
	return false
}
