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

// Package docs holds the tests that keep the documentation true to the
// code: the layer table, the recipes, the make targets' cheat sheet and the
// e2e scenarios of development.md, and attributes.md's tables of attributes
// and config fields; and that reference pages carry no dated runs or
// commit hashes (those live in docs/measurements/). (Generated tables
// are kept by the golden tests of hack/golden-tests; the flag tables by
// each binary's tests.)
package docs

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

const (
	module      = "github.com/gpudra/gpudra"
	development = "development.md"
	attributes  = "attributes.md"
)

var backquoted = regexp.MustCompile("`([^`]+)`")

// quoted is every backquoted word of a table cell.
func quoted(cell string) []string {
	var out []string
	for _, m := range backquoted.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestLayers: every package of the module is in one layer of
// development.md's table and imports only its own layer and the layers its
// row lists; go-nvml, kubeletplugin and client-go stay where the page
// says.
func TestLayers(t *testing.T) {
	layerOf := map[string]string{}     // package dir → layer
	mayImport := map[string][]string{} // layer → layers
	for _, row := range gpudratest.MarkdownTable(t, development, "## How the code is laid out") {
		layer := quoted(row[0])
		if len(layer) != 1 {
			t.Fatalf("layer row %q: want one layer name in backquotes", row[0])
		}
		for _, pkg := range quoted(row[1]) {
			if other, ok := layerOf[pkg]; ok {
				t.Errorf("%s is in two layers, %s and %s", pkg, other, layer[0])
			}
			layerOf[pkg] = layer[0]
		}
		mayImport[layer[0]] = append(quoted(row[2]), layer[0])
	}
	for layer, allowed := range mayImport {
		for _, l := range allowed {
			if _, ok := mayImport[l]; !ok {
				t.Errorf("layer %s may import %q, which is no layer", layer, l)
			}
		}
	}

	// Product code only: go list's Imports leave the tests out. The e2e
	// suite and the docs are test files alone.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	onlyIn := []struct {
		prefix string
		layers []string
	}{
		{"github.com/NVIDIA/go-nvml", []string{"NVML backends", "code generators"}},
		{"k8s.io/dynamic-resource-allocation/kubeletplugin", []string{"kubelet plugin", "in-process nodes", "commands", "tests"}},
	}
	noClientGo := []string{"device model", "NVML backends", "config API", "slice builder", "node state"}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		seen[pkg] = true
		layer, ok := layerOf[pkg]
		if !ok {
			t.Errorf("package %s is in no layer of %s: give it a row (or add it to one)", pkg, development)
			continue
		}
		for _, imp := range fields[1:] {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				depLayer, known := layerOf[dep]
				if known && !slices.Contains(mayImport[layer], depLayer) {
					t.Errorf("%s (%s) imports %s (%s), which its layer may not", pkg, layer, dep, depLayer)
				}
				continue
			}
			for _, rule := range onlyIn {
				if strings.HasPrefix(imp, rule.prefix) && !slices.Contains(rule.layers, layer) {
					t.Errorf("%s (%s) imports %s, which only %s may", pkg, layer, imp, strings.Join(rule.layers, ", "))
				}
			}
			if strings.HasPrefix(imp, "k8s.io/client-go/") && !strings.HasPrefix(imp, "k8s.io/client-go/kubernetes/scheme") && slices.Contains(noClientGo, layer) {
				t.Errorf("%s (%s) imports %s: that layer must not talk to the API server", pkg, layer, imp)
			}
		}
	}
	for pkg := range layerOf {
		if !seen[pkg] {
			t.Errorf("%s lists %s, which is no package of the module", development, pkg)
		}
	}
}

// TestRecipeFilesExist: every repository path development.md names exists,
// so that a recipe does not send anyone to a file that moved.
func TestRecipeFilesExist(t *testing.T) {
	data, err := os.ReadFile(development)
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{"pkg/", "cmd/", "deviceclasses/", "deployments/", "hack/", "e2e/", "docs/", "internal/"}
	checked := 0
	for _, word := range quoted(string(data)) {
		path, _, _ := strings.Cut(word, " ")
		if strings.ContainsAny(path, "<*") || !slices.ContainsFunc(roots, func(r string) bool { return strings.HasPrefix(path, r) }) {
			continue
		}
		checked++
		if _, err := os.Stat(filepath.Join("..", path)); err != nil {
			t.Errorf("%s names %s, which does not exist", development, path)
		}
	}
	if checked < 20 {
		t.Errorf("only %d paths found in %s: is the check still reading it?", checked, development)
	}
}

// TestE2EScenariosDocumented: development.md's e2e tables have a row for every
// scenario of the suites (TestGPUDRA on one node, TestMultiNode on
// several), and no row for a scenario that is gone.
func TestE2EScenariosDocumented(t *testing.T) {
	for _, suite := range []struct{ file, test, heading string }{
		{"e2e_test.go", "TestGPUDRA", "## End-to-end tests on a real cluster"},
		{"multinode_test.go", "TestMultiNode", "### `make e2e-multinode`"},
	} {
		scenarios := scenariosOf(t, suite.file, suite.test)
		var documented []string
		for _, row := range gpudratest.MarkdownTable(t, development, suite.heading) {
			documented = append(documented, quoted(row[0])...)
		}
		compareSets(t, suite.test+"'s scenarios", scenarios, "development.md's table under "+suite.heading, documented)
	}
}

// scenariosOf is the names of the t.Run calls in the test function of an
// e2e file.
func scenariosOf(t *testing.T, file, test string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "e2e", file))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	start := strings.Index(body, "func "+test+"(")
	if start < 0 {
		t.Fatalf("e2e/%s has no %s", file, test)
	}
	end := strings.Index(body[start:], "\n}\n")
	var scenarios []string
	for _, m := range regexp.MustCompile(`t\.Run\("([A-Za-z0-9]+)"`).FindAllStringSubmatch(body[start:start+end], -1) {
		scenarios = append(scenarios, m[1])
	}
	if len(scenarios) < 5 {
		t.Fatalf("found only %d scenarios in %s", len(scenarios), test)
	}
	return scenarios
}

// TestAttributesDocumented: attributes.md's tables of whole-GPU attributes and
// capacities name exactly what the plugin publishes on the whole GPUs of
// the fake profiles.
func TestAttributesDocumented(t *testing.T) {
	attrs, caps := map[string]bool{}, map[string]bool{}
	for _, profile := range nvmlfake.Profiles() {
		slices, err := fakenodes.Slices(context.Background(), profile, 1, gpu.DefaultDriverName)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if typ := d.Attributes[slicebuilder.AttrType]; typ.StringValue == nil || *typ.StringValue != slicebuilder.TypeGPU {
					continue
				}
				for name := range d.Attributes {
					attrs[string(name)] = true
				}
				for name := range d.Capacity {
					caps[string(name)] = true
				}
			}
		}
	}
	// imexReady is published only where the plugin asks a node's IMEX
	// daemon, which no fake node of an offline inventory has (an inventory
	// without it counts as ready, as gpudra-controller counts it).
	attrs[string(slicebuilder.AttrIMEXReady)] = true
	docAttrs, docCaps := firstColumn(t, attributes, "| attribute | type | meaning |"), firstColumn(t, attributes, "| capacity | unit | meaning |")
	compareSets(t, "the attributes of whole GPUs", slices.Sorted(maps.Keys(attrs)), "attributes.md's attribute table", docAttrs)
	compareSets(t, "the capacities of whole GPUs", slices.Sorted(maps.Keys(caps)), "attributes.md's capacity table", docCaps)
}

// TestMigAttributesDocumented: mig.md's table of MIG device attributes
// names exactly what the plugin publishes on the partitions of the fake
// profiles (slicebuilder.PartitionParentAttributes included).
func TestMigAttributesDocumented(t *testing.T) {
	attrs := map[string]bool{}
	for _, profile := range nvmlfake.Profiles() {
		slices, err := fakenodes.Slices(context.Background(), profile, 1, gpu.DefaultDriverName)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if typ := d.Attributes[slicebuilder.AttrType]; typ.StringValue != nil && *typ.StringValue == slicebuilder.TypeMIG {
					for name := range d.Attributes {
						attrs[string(name)] = true
					}
				}
			}
		}
	}
	if len(attrs) == 0 {
		t.Fatal("no fake profile publishes a MIG partition")
	}
	compareSets(t, "the attributes of MIG partitions", slices.Sorted(maps.Keys(attrs)), "mig.md's attribute table",
		firstColumn(t, "mig.md", "| attribute | type | meaning |"))
}

// firstColumn is the backquoted cells of the first column of each row of
// the table of file whose header row is header.
func firstColumn(t *testing.T, file, header string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+header+"\n")
	if i < 0 {
		t.Fatalf("%s has no table %q", file, header)
	}
	var out []string
	for _, line := range strings.Split(text[i+len(header)+2:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if cells := strings.Split(line, "|"); len(cells) > 1 && !strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			out = append(out, quoted(cells[1])...)
		}
	}
	return out
}

// TestEveryMigProfileHasItsDeviceClass: each MIG profile of a model in the
// fake's catalog has its DeviceClass in deviceclasses/mig-profiles.yaml,
// named mig-<profile>.gpudra.io, mapped to nvidia.com/mig-<profile> and
// selecting that profile; and every class there is a profile of some model.
// Profiles with "+" (media extensions) have none: "+" is valid in neither a
// class name nor an extended resource name.
func TestEveryMigProfileHasItsDeviceClass(t *testing.T) {
	dir := t.TempDir()
	profiles := map[string]string{} // profile → a model that has it
	for _, model := range nvmlfake.Models() {
		file := filepath.Join(dir, model+".yaml")
		if err := os.WriteFile(file, []byte("gpus:\n- model: "+model+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := fakenodes.WithNode(context.Background(), file, "docs", dir, func(node gpu.Node, _ string) error {
			if m := node.GPUs[0].MIG; m != nil {
				for _, p := range m.Profiles {
					if !strings.Contains(p.Name, "+") {
						profiles[p.Name] = model
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(profiles) == 0 {
		t.Fatal("no MIG profile in the catalog")
	}
	data, err := os.ReadFile(filepath.Join("..", "deviceclasses", "mig-profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]resourceapi.DeviceClass{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var dc resourceapi.DeviceClass
		if err := yaml.UnmarshalStrict([]byte(doc), &dc); err != nil {
			t.Fatal(err)
		}
		if dc.Name != "" {
			classes[dc.Name] = dc
		}
	}
	for profile, model := range profiles {
		name := "mig-" + profile + ".gpudra.io"
		dc, ok := classes[name]
		if !ok {
			t.Errorf("MIG profile %s (model %s) has no DeviceClass %s in deviceclasses/mig-profiles.yaml", profile, model, name)
			continue
		}
		delete(classes, name)
		if dc.Spec.ExtendedResourceName == nil || *dc.Spec.ExtendedResourceName != "nvidia.com/mig-"+profile {
			t.Errorf("DeviceClass %s: extendedResourceName %v, want nvidia.com/mig-%s", name, dc.Spec.ExtendedResourceName, profile)
		}
		if len(dc.Spec.Selectors) != 1 || !strings.Contains(dc.Spec.Selectors[0].CEL.Expression, ".profile == '"+profile+"'") {
			t.Errorf("DeviceClass %s does not select profile %s: %+v", name, profile, dc.Spec.Selectors)
		}
	}
	for name := range classes {
		t.Errorf("deviceclasses/mig-profiles.yaml has %s, which is no MIG profile of any model in the catalog", name)
	}
}

// TestConfigFieldsDocumented: every JSON field of GpuConfig and MigConfig,
// nested ones included, is named in attributes.md's section on the config API.
func TestConfigFieldsDocumented(t *testing.T) {
	data, err := os.ReadFile(attributes)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## Device configuration")
	if start < 0 {
		t.Fatalf("%s has no section ## Device configuration", attributes)
	}
	end := strings.Index(text[start+1:], "\n## ")
	section := text[start : start+1+end]
	// Words in backquotes, and in the code blocks (whose fences would
	// pair the backquotes wrongly).
	var words []string
	for i, part := range strings.Split(section, "```") {
		if i%2 == 1 {
			words = append(words, part)
		} else {
			words = append(words, quoted(part)...)
		}
	}
	named := map[string]bool{}
	for _, w := range words {
		for _, part := range regexp.MustCompile(`[A-Za-z]+`).FindAllString(w, -1) {
			named[part] = true
		}
	}
	fields := map[string]bool{}
	for _, v := range []any{configapi.GpuConfig{}, configapi.MigConfig{}} {
		jsonFields(reflect.TypeOf(v), fields)
	}
	if len(fields) < 5 {
		t.Fatalf("found only %d config fields", len(fields))
	}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !named[f] {
			t.Errorf("config field %s is not named in %s's section on the config API", f, attributes)
		}
	}
}

// jsonFields adds the JSON names of t's fields, and of the structs they
// hold, to out; the embedded TypeMeta (apiVersion, kind) is left out.
func jsonFields(t reflect.Type, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeOf(configapi.GpuConfig{}).PkgPath() {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		out[name] = true
		jsonFields(f.Type, out)
	}
}

func compareSets(t *testing.T, whatCode string, code []string, whatDoc string, doc []string) {
	t.Helper()
	for _, c := range code {
		if !slices.Contains(doc, c) {
			t.Errorf("%s has no row for %s (one of %s)", whatDoc, c, whatCode)
		}
	}
	for _, d := range doc {
		if !slices.Contains(code, d) {
			t.Errorf("%s has a row for %s, which is none of %s", whatDoc, d, whatCode)
		}
	}
}

// TestMakeTargetsCheatSheet: the cheat sheet at the top of development.md
// has one row for every target the Makefile documents with a `## target:`
// line, and no row for a target that is gone.
func TestMakeTargetsCheatSheet(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^## ([A-Za-z0-9_.-]+):`).FindAllStringSubmatch(string(mk), -1) {
		targets = append(targets, m[1])
	}
	if len(targets) < 20 {
		t.Fatalf("only %d `## target:` lines in the Makefile: is the test still reading it?", len(targets))
	}
	data, err := os.ReadFile(development)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Make targets\n")
	if !ok {
		t.Fatalf("%s has no \"## Make targets\" section", development)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	for _, target := range targets {
		if !slices.Contains(rows, target) {
			t.Errorf("make %s (a `## %s:` line of the Makefile) has no row in %s's cheat sheet", target, target, development)
		}
	}
	for _, row := range rows {
		if !slices.Contains(targets, row) {
			t.Errorf("%s's cheat sheet has a row for make %s, which has no `## %s:` line in the Makefile", development, row, row)
		}
	}
}

var (
	// datedRun is a calendar date, as a run is dated in the log.
	datedRun = regexp.MustCompile(`\b(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b`)
	// commitHash is a word of 7 to 40 hexadecimal digits with at least one
	// digit and one letter (so neither a number nor a word such as
	// "deadbeef" or "added"), standing alone: not a piece of a UUID, PCI
	// address, 0x number, checksum, path or URL (a hyphen, colon, dot,
	// slash or letter beside it).
	commitHash = regexp.MustCompile(`(^|[^\w.:/#@-])([0-9a-f]*[0-9][0-9a-f]*)([^\w:/-]|$)`)
	// pinnedSource is a file of another repository at a commit, the form
	// evidence is cited in (internal/nvmlfake/testdata/calibration): the
	// commit says what was read, not when gpudra was measured.
	pinnedSource = regexp.MustCompile(`[\w.-]+/[\w.-]+@[0-9a-f]{7,40}\b`)
)

// TestReferencePagesStateBehaviour: the reference pages (every page of
// docs/ but the dated log in docs/measurements/, the flag pages included)
// say what gpudra does today, with today's figures; a dated run or a
// commit hash belongs in the log (measurements/log.md), with the run it
// dates. Hex that is no commit (UUIDs, PCI addresses, checksums, 0x IDs)
// passes by its form, and so does another repository's file cited at a
// commit (owner/repo@commit).
func TestReferencePagesStateBehaviour(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == "measurements" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range datesAndCommits(line) {
				t.Errorf("%s:%d: %s in a reference page: state today's behaviour and figures, and move the run to measurements/log.md", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Errorf("only %d reference pages read: is the test still reading docs/?", checked)
	}
}

// datesAndCommits are the dated runs and commit hashes of a line.
func datesAndCommits(line string) []string {
	var out []string
	for _, m := range datedRun.FindAllString(line, -1) {
		out = append(out, "a dated run ("+m+")")
	}
	line = pinnedSource.ReplaceAllString(line, "")
	for _, m := range commitHash.FindAllStringSubmatch(line, -1) {
		if h := m[2]; len(h) >= 7 && len(h) <= 40 && strings.ContainsAny(h, "abcdef") {
			out = append(out, "a commit hash ("+h+")")
		}
	}
	return out
}

// TestDatesAndCommits: what TestReferencePagesStateBehaviour takes for a
// dated run or a commit, and the hex it must let pass.
func TestDatesAndCommits(t *testing.T) {
	for _, line := range []string{
		"measured on 2026-12-06 at noon",
		"seeds 1 and 3 on main b69162b",
		"the same benchmark (at 34d1d44)",
		"`.ci/run` on `b0b9897`",
		"before group commit (d1e7f6c) and after",
		"95932046683719c43b6a0dd9613c2e5aad5d6703 in prose",
	} {
		if len(datesAndCommits(line)) == 0 {
			t.Errorf("%q: no dated run or commit found", line)
		}
	}
	for _, line := range []string{
		"GPU-4f6a9c2e-1b3d-4c5e-8f7a-9b0c1d2e3f4a and MIG-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
		"pciBusID 0000:3b:00.0, device ID 0x233010DE, subsystem 0x16CA10DE",
		"sha256:4f6a9c2e1b3d4c5e8f7a9b0c1d2e3f4a4f6a9c2e1b3d4c5e8f7a9b0c1d2e3f4a",
		"4f6a9c2e1b3d4c5e8f7a9b0c1d2e3f4a4f6a9c2e1b3d4c5e8f7a9b0c1d2e3f4a  gpudra-linux-amd64",
		"ghcr.io/gpudra/gpudra@sha256:4f6a9c2e1b3d4c5e8f7a9b0c1d2e3f4a",
		"kubernetes-sigs/dra-driver-nvidia-gpu@95932046683719c43b6a0dd9613c2e5aad5d6703",
		"a deadbeef, a decade, 1234567 pods, 10.5 ms, 1e3 nodes, v1.35.0",
		"https://github.com/NVIDIA/go-nvml/blob/0a1b2c3d/pkg/nvml/device.go",
	} {
		if got := datesAndCommits(line); len(got) > 0 {
			t.Errorf("%q: found %v, which is no dated run or commit", line, got)
		}
	}
}
