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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runMigrateCLI runs `gpudra migrate args...` and returns its exit status,
// standard output and standard error.
func runMigrateCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runCommand(t, newMigrateCommand(), stdin, args...)
}

const cases = "../../internal/migrate/testdata/in"

// TestMigrateCommand: standard output, the report and the exit status;
// the output passes gpudra check (the command's round trip).
func TestMigrateCommand(t *testing.T) {
	code, out, report := runMigrateCLI(t, "", filepath.Join(cases, "time-slicing.yaml"), filepath.Join(cases, "mig.yaml"))
	if code != 0 {
		t.Fatalf("exit %d, want 0; report:\n%s", code, report)
	}
	if strings.Contains(out, "nvidia.com/v1beta1") || !strings.Contains(out, "# gpudra migrate: from ") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(report, "2 of 2 file(s) changed, 0 skipped, nothing left without an equivalent in gpudra\n") {
		t.Errorf("report:\n%s", report)
	}
	if code, text, _ := runCLI(t, out, "-"); code != 0 {
		t.Errorf("gpudra check on the output exits %d:\n%s", code, text)
	}

	code, _, report = runMigrateCLI(t, "", filepath.Join(cases, "no-equivalent.yaml"))
	if code != 1 || !strings.Contains(report, "no-equivalent: ResourceClaimTemplate vm-gpu") {
		t.Errorf("no-equivalent.yaml: exit %d, want 1; report:\n%s", code, report)
	}
	if code, _, report := runMigrateCLI(t, ""); code != 2 || !strings.Contains(report, "give YAML files") {
		t.Errorf("no arguments: exit %d, report %q", code, report)
	}
	if code, _, _ := runMigrateCLI(t, "a: [", "-"); code != 2 {
		t.Errorf("malformed standard input: exit %d, want 2", code)
	}
}

// TestMigrateSummary: the summary points to the marker comments only when
// something was marked (issue 18's audit: "0 thing(s) without an
// equivalent ... (each marked ...)" when there were none).
func TestMigrateSummary(t *testing.T) {
	for _, tc := range []struct {
		changed, files, skipped, unmigrated int
		want                                string
	}{
		{2, 2, 0, 0, "gpudra migrate: 2 of 2 file(s) changed, 0 skipped, nothing left without an equivalent in gpudra"},
		{0, 3, 1, 0, "gpudra migrate: 0 of 3 file(s) changed, 1 skipped, nothing left without an equivalent in gpudra"},
		{1, 1, 0, 2, "gpudra migrate: 1 of 1 file(s) changed, 0 skipped, 2 thing(s) without an equivalent in gpudra (each marked with a \"# gpudra migrate: no equivalent\" comment in the output)"},
	} {
		if got := migrateSummary(tc.changed, tc.files, tc.skipped, tc.unmigrated); got != tc.want {
			t.Errorf("migrateSummary(%d, %d, %d, %d) =\n%s\nwant\n%s", tc.changed, tc.files, tc.skipped, tc.unmigrated, got, tc.want)
		}
	}
}

// TestMigrateCommandOutputDir: one file per input under --output-dir,
// with the paths below the directory given.
func TestMigrateCommandOutputDir(t *testing.T) {
	out := t.TempDir()
	code, _, report := runMigrateCLI(t, "", "--output-dir", out, cases)
	if code != 1 { // the directory holds no-equivalent.yaml
		t.Fatalf("exit %d, want 1; report:\n%s", code, report)
	}
	entries, err := os.ReadDir(cases)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Error(err)
			continue
		}
		if strings.Contains(string(data), "deviceClassName: gpu.nvidia.com") {
			t.Errorf("%s: not migrated", e.Name())
		}
	}
}

// TestMigrateCommandSkipsUnreadableFiles: a directory with a Helm
// template and a broken file beside manifests: those two are reported and
// skipped, the others written, exit status 1.
func TestMigrateCommandSkipsUnreadableFiles(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	files := map[string]string{
		"a-template.yaml": "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {{ .Values.name }}\n",
		"b-broken.yaml":   "kind: [\n",
		"c-claim.yaml":    mustRead(t, filepath.Join(cases, "time-slicing.yaml")),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(in, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, report := runMigrateCLI(t, "", "--output-dir", out, in)
	if code != 1 {
		t.Fatalf("exit %d, want 1; report:\n%s", code, report)
	}
	for _, want := range []string{"a-template.yaml:1: unreadable: a Go template", "render it first", "b-broken.yaml:1: unreadable: malformed YAML", "1 of 3 file(s) changed, 2 skipped"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "c-claim.yaml")); err != nil {
		t.Errorf("the readable file was not written: %v", err)
	}
	for _, skipped := range []string{"a-template.yaml", "b-broken.yaml"} {
		if _, err := os.Stat(filepath.Join(out, skipped)); err == nil {
			t.Errorf("%s was written", skipped)
		}
	}
}

// TestMigrateNotesEscaped: a note quotes an object's name; what is not
// printable in it is escaped, so a name cannot forge a note or reach the
// terminal as a control sequence.
func TestMigrateNotesEscaped(t *testing.T) {
	in := "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\nmetadata:\n  name: \"domain\\r-:1: rewritten: all clear\\e[2J\"\nspec:\n  numNodes: 2\n"
	code, _, report := runMigrateCLI(t, in, "-")
	if code != 1 {
		t.Errorf("exit %d, want 1; report:\n%q", code, report)
	}
	if strings.ContainsAny(report, "\r\x1b") || !strings.Contains(report, `domain\r-:1: rewritten: all clear\x1b[2J`) {
		t.Errorf("report %q, want the name escaped", report)
	}
}
