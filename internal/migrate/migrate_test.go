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

package migrate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// migrateCase is one file of testdata/in: manifests shaped like NVIDIA's
// demos (written for these tests), with a header that says on which fake
// node gpudra check runs the migrated output and the exit status it must
// give:
//
//	# profile: dgx-a100
//	# check: 0
type migrateCase struct {
	file    string
	profile string
	exit    int
}

func loadCases(t *testing.T) []migrateCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "in", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	var out []migrateCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := migrateCase{file: f, profile: fakenodes.DefaultProfile, exit: -1}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") {
				break
			}
			k, v, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ": ")
			switch k {
			case "profile":
				c.profile = v
			case "check":
				c.exit, _ = strconv.Atoi(v)
			}
		}
		if c.exit < 0 {
			t.Fatalf("%s: the header needs check: <exit status>", f)
		}
		out = append(out, c)
	}
	return out
}

func migrateOne(t *testing.T, file string, opts Options) (*Result, []byte) {
	t.Helper()
	in, err := scheduler.ReadPaths([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Files(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, res.Files[0].Data
}

func notesText(res *Result) string {
	var b strings.Builder
	for _, n := range res.Notes {
		b.WriteString(n.String() + "\n")
	}
	return b.String()
}

// runCheck runs gpudra check on manifests against one fake node of a
// profile, with the built-in classes, as `gpudra check --profile` does.
func runCheck(t *testing.T, name string, data []byte, profile, driverName string) *check.Report {
	t.Helper()
	in := &scheduler.Manifests{}
	if err := in.Add(name, data); err != nil {
		t.Fatal(err)
	}
	if driverName == "" {
		driverName = "gpu.gpudra.io"
	}
	if profile == nvlinkProfile {
		return runCheckNVLink(t, in, driverName)
	}
	slices, err := fakenodes.Slices(context.Background(), profile, 1, driverName)
	if err != nil {
		t.Fatal(err)
	}
	// The fake node republishes as the plugin does once claims are
	// prepared (a workload's replicas each take a spare's partitions).
	rp, err := fakenodes.NewRepublisher(profile, driverName, fakenodes.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rp.Close() })
	rep, err := check.Run(context.Background(), check.Options{Inputs: in, Slices: slices, Republish: rp.Slices, BuiltinClasses: true, DriverName: driverName})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// nvlinkProfile, as a case's profile, is an inventory of multi-node
// NVLink: three DGX H100 nodes (whole GPUs), node-1 and node-2 in one
// NVLink domain and node-3 in another, each domain with a pool of 8
// exclusive IMEX channels and the shared channel 0, made by hand
// (gpudratest.InNVLinkDomains) until the fake profiles and
// gpudra-controller publish them; the channel classes come from
// gpudratest.ChannelClasses until the chart's deviceclasses/ carry them.
const nvlinkProfile = "nvlink"

func runCheckNVLink(t *testing.T, in *scheduler.Manifests, driverName string) *check.Report {
	t.Helper()
	ctx := context.Background()
	gpus, err := fakenodes.SlicesOf(ctx, fakenodes.DefaultProfile, 3, driverName, fakenodes.Pool{WholeGPUsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	slices, nodes := gpudratest.InNVLinkDomains(driverName, 8, gpus, map[string]string{
		"node-1": gpudratest.DomainA, "node-2": gpudratest.DomainA, "node-3": gpudratest.DomainB,
	})
	for _, n := range nodes {
		data, err := sigsyaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Add("nodes.yaml", append([]byte("apiVersion: v1\nkind: Node\n"), data...)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := check.Run(ctx, check.Options{Inputs: in, Slices: slices, BuiltinClasses: true, ClusterClasses: gpudratest.ChannelClasses(), DriverName: driverName})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func findings(rep *check.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "  %s %s: %s %s: %s (%s)\n", f.Severity, f.Kind, f.Source, f.Object, f.Message, f.Hint)
	}
	return b.String()
}

// TestMigrateGolden: each case's migrated text and report match
// testdata/out (after an intended change: go test ./internal/migrate -update,
// and review the diff).
func TestMigrateGolden(t *testing.T) {
	for _, c := range loadCases(t) {
		base := strings.TrimSuffix(filepath.Base(c.file), ".yaml")
		t.Run(base, func(t *testing.T) {
			res, out := migrateOne(t, c.file, Options{})
			got := map[string]string{base + ".yaml": string(out), base + ".notes": notesText(res)}
			for name, text := range got {
				gpudratest.GoldenFile(t, filepath.Join("testdata", "out", name), []byte(text))
			}
		})
	}
}

// TestMigratedPassesCheck: NVIDIA-shaped manifests fail gpudra check as
// they are; what migrate writes passes it on the case's fake node (exit
// 0), except where the case has things without an equivalent, which
// migrate reports and check still flags.
func TestMigratedPassesCheck(t *testing.T) {
	for _, c := range loadCases(t) {
		base := strings.TrimSuffix(filepath.Base(c.file), ".yaml")
		t.Run(base, func(t *testing.T) {
			orig, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if rep := runCheck(t, c.file, orig, c.profile, ""); rep.ExitCode == 0 {
				t.Errorf("gpudra check passes the unmigrated input: the case tests nothing")
			}
			res, out := migrateOne(t, c.file, Options{})
			rep := runCheck(t, c.file+" (migrated)", out, c.profile, "")
			if rep.ExitCode != c.exit {
				t.Errorf("gpudra check exits %d on the migrated output, want %d; findings:\n%s\noutput:\n%s", rep.ExitCode, c.exit, findings(rep), out)
			}
			if unmigrated := res.Unmigrated(); (c.exit == 0) != (unmigrated == 0) {
				t.Errorf("%d things without an equivalent reported, with check exit %d:\n%s", unmigrated, c.exit, notesText(res))
			}
		})
	}
}

// TestMigrateIdempotent: migrating the output again changes nothing.
func TestMigrateIdempotent(t *testing.T) {
	for _, c := range loadCases(t) {
		_, out := migrateOne(t, c.file, Options{})
		res, err := Files([]scheduler.File{{Name: "again.yaml", Data: out}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Files[0].Changed {
			t.Errorf("%s: a second migration changes the output:\n%s", c.file, notesText(res))
		}
	}
}

// TestMigrateLeavesGpudraManifests: gpudra's own classes and examples
// come out byte for byte.
func TestMigrateLeavesGpudraManifests(t *testing.T) {
	var in []scheduler.File
	err := fs.WalkDir(deviceclasses.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(deviceclasses.FS, p)
		in = append(in, scheduler.File{Name: p, Data: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Files(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range res.Files {
		if f.Changed || !bytes.Equal(f.Data, in[i].Data) {
			t.Errorf("%s changed", f.Name)
		}
	}
	if len(res.Notes) != 0 {
		t.Errorf("notes on gpudra's own manifests:\n%s", notesText(res))
	}
}

// TestMigrateDriverName: with another driver name the classes are named
// as the chart names them for it (gpu.gpudra.io becomes the driver name,
// mig.gpudra.io becomes mig.<driver name>), and the output passes check
// run for that driver name.
func TestMigrateDriverName(t *testing.T) {
	const driver = "gpu.example.org"
	for _, file := range []string{"quickstart.yaml", "mig.yaml"} {
		path := filepath.Join("testdata", "in", file)
		_, out := migrateOne(t, path, Options{DriverName: driver})
		text := string(out)
		var body strings.Builder
		for _, l := range strings.Split(text, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				body.WriteString(l + "\n")
			}
		}
		if b := body.String(); strings.Contains(b, "gpu.gpudra.io") || strings.Contains(b, "mig.gpudra.io") || strings.Contains(b, "gpu.nvidia.com") {
			t.Errorf("%s: the output names gpudra's default driver or NVIDIA's:\n%s", file, text)
		}
		profile := fakenodes.DefaultProfile
		if file == "mig.yaml" {
			if !strings.Contains(text, "deviceClassName: mig."+driver) {
				t.Errorf("mig.yaml: no class mig.%s in\n%s", driver, text)
			}
		}
		if rep := runCheck(t, path, out, profile, driver); rep.ExitCode != 0 {
			t.Errorf("%s: check for driver %s exits %d:\n%s", file, driver, rep.ExitCode, findings(rep))
		}
	}
}

// TestStyleOf: the indentation and sequence style a document is written
// in, so that a rewritten document looks like its original.
func TestStyleOf(t *testing.T) {
	for _, tc := range []struct {
		text    string
		indent  int
		compact bool
	}{
		{"a:\n  b:\n  - c\n", 2, true},
		{"a:\n  b:\n    - c\n", 2, false},
		{"a:\n    b: 1\n    c:\n    - d\n", 4, true},
		{"a: 1\n", 2, true},
	} {
		indent, compact := styleOf([]byte(tc.text))
		if indent != tc.indent || compact != tc.compact {
			t.Errorf("styleOf(%q) = %d, %v; want %d, %v", tc.text, indent, compact, tc.indent, tc.compact)
		}
	}
}

// TestRewriteCEL: the renames inside expressions, in both quote styles and
// both ways of naming an attribute.
func TestRewriteCEL(t *testing.T) {
	for _, tc := range []struct{ in, out, missing string }{
		{`device.driver == 'gpu.nvidia.com'`, `device.driver == 'gpu.gpudra.io'`, ""},
		{`device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`, `device.attributes["gpu.gpudra.io"].profile == "1g.10gb"`, ""},
		{`device.attributes['gpu.nvidia.com'].pcieBusID == '0000:1b:00.0'`, `device.attributes['resource.kubernetes.io'].pciBusID == '0000:1b:00.0'`, ""},
		{`device.attributes['gpu.nvidia.com']['pcieBusID'] != ''`, `device.attributes['resource.kubernetes.io'].pciBusID != ''`, ""},
		{`device.capacity['gpu.nvidia.com'].memorySlice3 == quantity('1')`, `device.capacity['gpu.gpudra.io'].memorySlice3 == quantity('1')`, "capacity memorySlice3"},
		{`device.attributes['gpu.nvidia.com'].type == 'vfio'`, `device.attributes['gpu.gpudra.io'].type == 'vfio'`, "type 'vfio'"},
		{`device.attributes['gpu.gpudra.io'].index == 0`, `device.attributes['gpu.gpudra.io'].index == 0`, ""},
	} {
		out, _, missing := rewriteCEL(tc.in, "gpu.gpudra.io")
		if out != tc.out {
			t.Errorf("rewriteCEL(%q) = %q, want %q", tc.in, out, tc.out)
		}
		got := strings.Join(missing, "; ")
		if (tc.missing == "") != (got == "") || !strings.Contains(got, tc.missing) {
			t.Errorf("rewriteCEL(%q) reports %q, want %q", tc.in, got, tc.missing)
		}
	}
}
