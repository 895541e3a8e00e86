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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/migrate"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/textsafe"
)

func newMigrateCommand() *cobra.Command {
	var opts migrate.Options
	var outDir, output string
	cmd := &cobra.Command{
		Use:   "migrate [FILE|DIR|-]...",
		Short: "Rewrite manifests written for NVIDIA's DRA driver for gpudra, and report what has no equivalent",
		Long: `migrate reads manifests written for NVIDIA's DRA driver (dra-driver-nvidia-gpu)
and writes gpudra's equivalents:

  DeviceClass gpu.nvidia.com, mig.nvidia.com   → gpu.gpudra.io, mig.gpudra.io
  driver and attribute domain gpu.nvidia.com   → gpu.gpudra.io (selectors,
                                                 matchAttribute, capacity requests,
                                                 opaque configs)
  attribute pcieBusID (older releases)         → resource.kubernetes.io/pciBusID
  resource.nvidia.com/v1beta1 GpuConfig        → resource.gpudra.io/v1alpha1 GpuConfig
  resource.nvidia.com/v1beta1 MigDeviceConfig  → resource.gpudra.io/v1alpha1 MigConfig
    sharing.timeSlicingConfig                  → sharing.timeSlicing
    sharing.mpsConfig                          → sharing.mps
    mpsConfig.defaultPerDevicePinnedMemoryLimit → mps.perDevicePinnedMemoryLimits

  resource.k8s.io v1beta1, v1beta2, v1alpha3    → resource.k8s.io/v1 (request
                                                 fields under exactly)
  pod resourceClaims[].source.resourceClaim…     → resourceClaims[].resourceClaim…
                                                 (the form of Kubernetes 1.31+)

NVIDIA's own DeviceClasses gpu.nvidia.com and mig.nvidia.com (as helm template
renders them) and its ResourceSlices are dropped: gpudra's chart installs its
classes and its plugin publishes its own slices. What has no equivalent is left
as it is, reported, and marked in the output with a "# gpudra migrate: no
equivalent" comment: ComputeDomains, IMEX channels and their classes
(multi-node NVLink), VFIO passthrough and its class, attributes gpudra does
not publish (addressingMode, memorySlice capacities), a MIG device's uuid or
index (gpudra's are created on demand), NVIDIA's integer shares, per-device MPS
limits keyed by another GPU than the claim's one MPS device, classic DRA
(resource.k8s.io/v1alpha2, GpuClaimParameters), nvidia-mig-parted configs.

Files are migrated one by one: a file that is not YAML, or a Go template (a
Helm chart's: render it first), is reported and skipped, and the others are
written.

Only the documents that change are rewritten, and only the names in them:
comments, layout and everything else stay as written. It reads what gpudra
check reads (files, directories, - for standard input) and writes to standard
output, or with --output-dir one file per input; the report goes to standard
error. Check the result with gpudra check.

-o json and -o yaml print one object instead: every file (its name, whether
it changed or was skipped and why, and, without --output-dir, its migrated
content) and the report's notes.

Exit status: 0 everything migrated, 1 something has no equivalent or a file
was skipped (see the report), 2 no input could be read or a bad command
line.`,
		Example: `  gpudra migrate demo/specs/quickstart/ > migrated.yaml && gpudra check migrated.yaml
  gpudra migrate --output-dir migrated/ manifests/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			code := runMigrate(cmd, args, opts, outDir, output)
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.DriverName, "driver-name", gpu.DefaultDriverName, "the DRA driver name gpudra runs as (the chart's driverName): the driver, attribute domain and class names to write")
	f.StringVar(&outDir, "output-dir", "", "write each input file here, under its name (relative to the directory given), instead of to standard output")
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// migrateResult is what -o json|yaml prints.
type migrateResult struct {
	Files      []migratedFile `json:"files"`
	Notes      []migrate.Note `json:"notes"`
	Changed    int            `json:"changed"`
	Unmigrated int            `json:"unmigrated"`
	Skipped    int            `json:"skipped"`
}

type migratedFile struct {
	Name    string `json:"name"`
	Changed bool   `json:"changed"`
	// Skipped says why the file was not migrated (it is not written).
	Skipped string `json:"skipped,omitempty"`
	// Content is the migrated text, unless --output-dir wrote it.
	Content *string `json:"content,omitempty"`
	// Written is where --output-dir put it.
	Written string `json:"written,omitempty"`
}

func runMigrate(cmd *cobra.Command, args []string, opts migrate.Options, outDir, output string) int {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gpudra migrate:", textsafe.Text(err.Error()))
		return 2
	}
	if len(args) == 0 {
		return fail(errors.New("give YAML files or directories to migrate (or - for standard input); see gpudra migrate --help"))
	}
	in, err := scheduler.ReadPaths(args, func() ([]byte, error) { return io.ReadAll(cmd.InOrStdin()) })
	if err != nil {
		return fail(err)
	}
	res, err := migrate.Files(in, opts)
	if err != nil {
		return fail(err)
	}
	skipped := res.Skipped()
	structured := migrateResult{Notes: res.Notes, Unmigrated: res.Unmigrated() - skipped, Skipped: skipped}
	for _, f := range res.Files {
		mf := migratedFile{Name: f.Name, Changed: f.Changed, Skipped: f.Skipped}
		if outDir == "" && f.Skipped == "" {
			content := string(f.Data)
			mf.Content = &content
		}
		structured.Files = append(structured.Files, mf)
	}
	if outDir == "" && output == "text" {
		if err := writeMigratedText(cmd.OutOrStdout(), res.Files); err != nil {
			return fail(err)
		}
	} else if outDir != "" {
		if err := writeMigratedFiles(outDir, outputNames(args, res.Files), res.Files, structured.Files); err != nil {
			return fail(err)
		}
	}
	for _, f := range res.Files {
		if f.Changed {
			structured.Changed++
		}
	}
	if output != "text" {
		if err := writeObject(cmd.OutOrStdout(), output, structured); err != nil {
			return fail(err)
		}
	} else {
		// Notes quote names and values from the manifests: one line
		// each, nothing in them moves the cursor.
		for _, n := range res.Notes {
			fmt.Fprintln(stderr, textsafe.Line(n.String()))
		}
		fmt.Fprintln(stderr, migrateSummary(structured.Changed, len(res.Files), skipped, structured.Unmigrated))
	}
	switch {
	case skipped == len(res.Files):
		return 2 // nothing could be read
	case res.Unmigrated() > 0:
		return 1
	}
	return 0
}

// writeMigratedText prints the migrated files one after the other, as one
// YAML stream, each named when there are several; a skipped file is a
// comment.
func writeMigratedText(out io.Writer, files []migrate.Output) error {
	for i, f := range files {
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if f.Skipped != "" {
			fmt.Fprintf(out, "# gpudra migrate: skipped %s: %s\n", textsafe.Line(f.Name), textsafe.Line(f.Skipped))
			continue
		}
		if len(files) > 1 {
			fmt.Fprintf(out, "# gpudra migrate: from %s\n", textsafe.Line(f.Name))
		}
		data := f.Data
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// writeMigratedFiles writes each file that was read to outDir under its
// name (names, from outputNames), and records where in structured.
func writeMigratedFiles(outDir string, names []string, files []migrate.Output, structured []migratedFile) error {
	for i, f := range files {
		if f.Skipped != "" {
			continue
		}
		dst := filepath.Join(outDir, names[i])
		structured[i].Written = dst
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// migrateSummary is the last line of the text report. The marker comment
// is pointed to only when there is something marked: "0 thing(s) ...
// (each marked ...)" sent users looking for comments that are not there.
func migrateSummary(changed, files, skipped, unmigrated int) string {
	s := fmt.Sprintf("gpudra migrate: %d of %d file(s) changed, %d skipped, ", changed, files, skipped)
	if unmigrated == 0 {
		return s + "nothing left without an equivalent in gpudra"
	}
	return s + fmt.Sprintf("%d thing(s) without an equivalent in gpudra (each marked with a \"# gpudra migrate: no equivalent\" comment in the output)", unmigrated)
}

// outputNames names the output files under --output-dir: a file given by
// name keeps its base name, a file found in a directory its path below
// that directory, standard input "stdin.yaml".
func outputNames(args []string, files []migrate.Output) []string {
	out := make([]string, len(files))
	for i, f := range files {
		name := filepath.Base(f.Name)
		if f.Name == "<stdin>" {
			name = "stdin.yaml"
		}
		for _, a := range args {
			if a == "-" {
				continue
			}
			if rel, err := filepath.Rel(a, f.Name); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
				name = rel
				break
			}
		}
		out[i] = name
	}
	return out
}
