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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// run checks the files under testdata/cases on one node of a profile.
func run(t *testing.T, profile string, sequential bool, files ...string) *Report {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", "cases", f))
	}
	in, err := scheduler.LoadPaths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, profile, 1, Options{Inputs: in, Sequential: sequential, BuiltinClasses: true, ListLimit: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func claim(t *testing.T, rep *Report, name string) ClaimInfo {
	t.Helper()
	for _, c := range rep.Claims {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no claim %s in the report", name)
	return ClaimInfo{}
}

// wholeGPUs keeps the whole-GPU devices of a match list (MIG placements
// are named gpu-<minor>-mig-…, monitoring devices gpu-<minor>-monitor: a
// broad class's selector matches those too, their monitoring-only taint
// keeps the request off them).
func wholeGPUs(devices []string) []string {
	var out []string
	for _, d := range devices {
		if !strings.Contains(d, "-mig-") && !strings.HasSuffix(d, "-monitor") {
			out = append(out, d)
		}
	}
	return out
}

func findings(rep *Report, kind FindingKind) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func nodeGPUs(minors ...string) []string {
	var out []string
	for _, m := range minors {
		out = append(out, "node-1/gpu-"+m)
	}
	return out
}

// A class taking all of the driver's devices and a claim for at least
// 40Gi: all 8 A100 40GB match; on the mixed node the H100s and A100s but
// not the L4.
func TestCapacitySelector(t *testing.T) {
	for _, tt := range []struct {
		profile string
		want    []string
	}{
		{"dgx-a100", nodeGPUs("0", "1", "2", "3", "4", "5", "6", "7")},
		{"mixed", nodeGPUs("0", "1", "2", "3", "4", "5", "6", "7")}, // gpu-8 is the L4 24GB
	} {
		t.Run(tt.profile, func(t *testing.T) {
			rep := run(t, tt.profile, false, "capacity.yaml")
			c := claim(t, rep, "default/big-gpu")
			got := wholeGPUs(c.Requests[0].Matches.Devices)
			if !slices.Equal(got, tt.want) {
				t.Errorf("whole GPUs matched: got %v, want %v", got, tt.want)
			}
			if c.Allocation == nil {
				t.Fatalf("not allocated: %v", c.Unsatisfiable)
			}
			if rep.Errors() != 0 {
				t.Errorf("unexpected findings: %+v", rep.Findings)
			}
			if rep.ExitCode != ExitClean {
				t.Errorf("exit code %d, want 0", rep.ExitCode)
			}
		})
	}
}

// The same selector on device.attributes: a finding with the capacity
// hint and a caret, and the per-device runtime error, not a crash.
func TestCapacityUsedAsAttribute(t *testing.T) {
	rep := run(t, "dgx-a100", false, "capacity-as-attribute.yaml")
	fs := findings(rep, FindingCapacityAsAttribute)
	if len(fs) != 1 {
		t.Fatalf("want one %s finding, got %+v", FindingCapacityAsAttribute, rep.Findings)
	}
	f := fs[0]
	if !strings.Contains(f.Hint, "device.capacity['gpu.gpudra.io'].memory") {
		t.Errorf("hint %q does not suggest device.capacity", f.Hint)
	}
	if !strings.Contains(f.Caret, "^") || f.Field != "spec.devices.requests[0].exactly.selectors[0].cel.expression" || f.Source.Line != 14 {
		t.Errorf("finding not located: field %q line %d caret %q", f.Field, f.Source.Line, f.Caret)
	}
	rt := findings(rep, FindingRuntimeError)
	if len(rt) != 1 || !strings.Contains(rt[0].Message, "no such key: memory") || len(rt[0].Devices) == 0 || !strings.Contains(rt[0].Hint, "has(") {
		t.Errorf("want a runtime error naming the key, a device and the has() hint, got %+v", rt)
	}
	if rep.ExitCode != ExitFindings {
		t.Errorf("exit code %d, want 1", rep.ExitCode)
	}
}

// cudaComputeCapability compared with a string: a finding that names the
// type and suggests semver().
func TestVersionComparedWithString(t *testing.T) {
	rep := run(t, "dgx-h100", false, "version-as-string.yaml")
	fs := findings(rep, FindingTypeMismatch)
	if len(fs) != 1 {
		t.Fatalf("want one %s finding, got %+v", FindingTypeMismatch, rep.Findings)
	}
	if !strings.Contains(fs[0].Message, "is a version") || !strings.Contains(fs[0].Hint, "semver('8.0.0')") {
		t.Errorf("finding does not name the type or the fix: %+v", fs[0])
	}
	rt := findings(rep, FindingRuntimeError)
	if len(rt) != 1 || !strings.Contains(rt[0].Hint, "cudaComputeCapability is a version") {
		t.Errorf("runtime error should name the attribute's type: %+v", rt)
	}
}

// Eight GPUs on one NVLink island, on a node with two islands of four:
// unsatisfiable, and the reason says so.
func TestNVLinkEightOnTwoIslands(t *testing.T) {
	rep := run(t, "mixed", false, "nvlink-8.yaml")
	c := claim(t, rep, "default/nvlink-8")
	if c.Allocation != nil {
		t.Fatalf("allocated %+v, want unsatisfiable", c.Allocation)
	}
	why := strings.Join(c.Unsatisfiable, "\n")
	for _, want := range []string{"matchAttribute gpu.gpudra.io/nvlinkGroup cannot be met", "largest group has 4", "nvlinkGroup=0: 4", "nvlinkGroup=4: 4"} {
		if !strings.Contains(why, want) {
			t.Errorf("explanation %q lacks %q", why, want)
		}
	}
	if len(findings(rep, FindingUnsatisfiable)) != 1 || rep.ExitCode != ExitFindings {
		t.Errorf("want one unsatisfiable finding and exit 1, got %+v", rep.Findings)
	}
	// On a DGX H100 (one island of eight) the same claim fits.
	rep = run(t, "dgx-h100", false, "nvlink-8.yaml")
	if c := claim(t, rep, "default/nvlink-8"); c.Allocation == nil || len(c.Allocation.Devices) != 8 {
		t.Errorf("dgx-h100: want 8 GPUs, got %+v / %v", c.Allocation, c.Unsatisfiable)
	}
}

// firstAvailable (an H100, else two A100s) on the mixed node: the H100
// subrequest is taken; in sequence, once the four H100s are gone, the A100
// subrequest is.
func TestFirstAvailable(t *testing.T) {
	rep := run(t, "mixed", false, "first-available.yaml")
	c := claim(t, rep, "default/h100-or-two-a100")
	if c.Allocation == nil || len(c.Allocation.Devices) != 1 || c.Allocation.Devices[0].Request != "gpu/h100" {
		t.Fatalf("want the h100 subrequest, got %+v %v", c.Allocation, c.Unsatisfiable)
	}
	var text strings.Builder
	if err := rep.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "took subrequest h100 for request gpu") {
		t.Errorf("the report does not say which subrequest was taken:\n%s", text.String())
	}

	// Six pods of the template in sequence: four H100s, then two A100 pairs.
	in := &scheduler.Manifests{}
	data, err := os.ReadFile(filepath.Join("testdata", "cases", "first-available.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Add("first-available.yaml", data); err != nil {
		t.Fatal(err)
	}
	pods := ""
	for _, p := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		pods += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p" + p + "}\nspec:\n  containers: [{name: c, image: x}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: h100-or-two-a100}]\n"
	}
	if err := in.Add("pods.yaml", []byte(pods)); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(context.Background(), onProfile(t, "mixed", 1, Options{Inputs: in, Sequential: true, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.Claims {
		switch {
		case c.Allocation != nil:
			got = append(got, c.Allocation.Devices[0].Request)
		default:
			got = append(got, "none")
		}
	}
	want := []string{"gpu/h100", "gpu/h100", "gpu/h100", "gpu/h100", "gpu/a100", "gpu/a100", "none"}
	if !slices.Equal(got, want) {
		t.Errorf("sequential subrequests: got %v, want %v", got, want)
	}
	last := claim(t, rep, "default/pg-gpu")
	if why := strings.Join(last.Unsatisfiable, " "); !strings.Contains(why, "no subrequest can be satisfied") || !strings.Contains(why, "earlier claims hold") {
		t.Errorf("7th pod: explanation %q", why)
	}
}

// Unusable input: a clear message and an InputError (exit 2). What is
// wrong with one object is a finding instead (TestInputProblems).
func TestUnusableInput(t *testing.T) {
	for _, tt := range []struct {
		name, data, want string
	}{
		{"empty", "", "the file is empty"},
		{"blank", "\n\n  \n", "the file is empty"},
		{"comments", "# nothing\n---\n# still nothing\n", "holds no objects"},
		{"malformed", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n", "malformed YAML"},
		{"tabs", "apiVersion: v1\nkind: Pod\n\tmetadata: {}\n", "malformed YAML"},
		{"scalar", "hello\n", "not a Kubernetes object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := &scheduler.Manifests{}
			err := in.Add("in.yaml", []byte(tt.data))
			var ie *scheduler.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("want an InputError, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "in.yaml") {
				t.Errorf("message %q should name the file and say %q", err, tt.want)
			}
		})
	}
	// The malformed line is the file's line, not the document's.
	in := &scheduler.Manifests{}
	err := in.Add("in.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n"))
	if err == nil || !strings.Contains(err.Error(), "line 8") && !strings.Contains(err.Error(), "line 9") {
		t.Errorf("want the file line of the error, got %v", err)
	}
	// No inputs at all.
	if _, err := Run(context.Background(), Options{}); !errors.As(err, new(*scheduler.InputError)) {
		t.Errorf("no inputs: want an InputError, got %v", err)
	}
	// A bad version or profile.
	ok := &scheduler.Manifests{}
	if err := ok.Add("c.yaml", []byte("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: x}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Inputs: ok, KubernetesVersion: "1.29"}); !errors.As(err, new(*scheduler.InputError)) {
		t.Errorf("version 1.29: want an InputError, got %v", err)
	}
}

// An object the API server rejects, or one check does not read, is a
// finding at its line, and the run goes on with the others.
func TestInputProblems(t *testing.T) {
	const good = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: good}\nspec:\n  selectors:\n  - cel: {expression: \"true\"}\n---\n"
	for _, tt := range []struct {
		name, data string
		kind       FindingKind
		severity   string
		line       int
		want       string
	}{
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 8, "kind is required"},
		{"no apiVersion", "kind: Pod\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 8, "apiVersion is required"},
		{"not an object", "replicas: 3\nimage: x\n", FindingInvalid, SeverityError, 8, "not a Kubernetes object"},
		{"misspelt kind", "apiVersion: resource.k8s.io/v1\nkind: DeviceKlass\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 9, "did you mean DeviceClass?"},
		{"misspelt core kind", "apiVersion: v1\nkind: Podd\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 9, "did you mean Pod?"},
		{"removed version", "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 8, "use apiVersion apps/v1"},
		{"NVIDIA's custom resource", "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\nmetadata: {name: x}\n", FindingNoCRD, SeverityError, 8, "gpudra migrate turns the ComputeDomain into the claim template it names"},
		{"custom resource", "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\n", FindingSkipped, SeverityWarning, 8, "not checked"},
		{"classic DRA", "apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceClaimTemplate\nmetadata: {name: x}\n", FindingInvalid, SeverityError, 8, "classic DRA API"},
		{"v1beta1", "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: x}\n", FindingNotServed, SeverityError, 8, "does not serve resource.k8s.io/v1beta1 unless an admin enables it"},
		{"v1alpha3", "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceClass\nmetadata: {name: x}\n", FindingNotServed, SeverityError, 8, "the API of Kubernetes 1.31"},
		{"wrong type", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: x}\nspec: {selectors: 3}\n", FindingInvalid, SeverityError, 8, "cannot be decoded"},
		{"unknown field", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: x}\nspec:\n  selector: []\n", FindingUnknownField, SeverityError, 12, `unknown field "spec.selector"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := &scheduler.Manifests{}
			if err := in.Add("in.yaml", []byte(good+tt.data)); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), onProfile(t, "dgx-a100", 1, Options{Inputs: in}))
			if err != nil {
				t.Fatal(err)
			}
			fs := findings(rep, tt.kind)
			if len(fs) != 1 {
				t.Fatalf("want one %s finding, got %+v", tt.kind, rep.Findings)
			}
			f := fs[0]
			if f.Severity != tt.severity || f.Source.Line != tt.line || !strings.Contains(f.Message+" "+f.Hint, tt.want) {
				t.Errorf("got %s at line %d: %s (hint %q); want %s at line %d saying %q", f.Severity, f.Source.Line, f.Message, f.Hint, tt.severity, tt.line, tt.want)
			}
			if len(rep.Classes) == 0 || rep.Classes[0].Name != "good" {
				t.Errorf("the other object was not checked: %+v", rep.Classes)
			}
		})
	}
}

// One mistake per selector, each a located finding with a hint.
func TestFindings(t *testing.T) {
	rep := run(t, "dgx-h100", false, "findings.yaml")
	want := map[FindingKind]string{
		FindingUnknownDriver:       `did you mean "gpu.gpudra.io"?`,
		FindingClassMatchesNothing: "matches none",
		FindingCompile:             "Syntax error",
		FindingUnknownAttribute:    `did you mean "productName"?`,
		FindingUnknownCapacity:     `did you mean "memory"?`,
		FindingUnknownClass:        `did you mean "gpu.gpudra.io"?`,
		FindingRuntimeError:        "no such key",
	}
	for kind, text := range want {
		fs := findings(rep, kind)
		if len(fs) == 0 {
			t.Errorf("no %s finding", kind)
			continue
		}
		if !strings.Contains(fs[0].Message+" "+fs[0].Hint, text) {
			t.Errorf("%s: %q / %q lacks %q", kind, fs[0].Message, fs[0].Hint, text)
		}
		if fs[0].Source.File == "" || fs[0].Object == "" {
			t.Errorf("%s: not located: %+v", kind, fs[0])
		}
	}
	c := findings(rep, FindingCompile)[0]
	if c.Source.Line != 18 || !strings.Contains(c.Message, "^") {
		t.Errorf("compile error: want line 18 and the compiler's caret, got %d %q", c.Source.Line, c.Message)
	}
	if rep.ExitCode != ExitFindings {
		t.Errorf("exit code %d", rep.ExitCode)
	}
}

// Partitionable devices from a hand-written inventory: counters
// exhausted, explained; before Kubernetes 1.36 the API server drops the
// counters, and check reads the slices as it stores them.
func TestCounters(t *testing.T) {
	rep := run(t, "", false, "partitioned-slices.yaml")
	if c := claim(t, rep, "default/two-parts"); c.Allocation == nil || len(c.Allocation.Devices) != 2 {
		t.Errorf("two parts: want 2 devices, got %+v %v", c.Allocation, c.Unsatisfiable)
	}
	c := claim(t, rep, "default/three-parts")
	if why := strings.Join(c.Unsatisfiable, " "); !strings.Contains(why, "counters exhausted") || !strings.Contains(why, "120Gi") || !strings.Contains(why, "80Gi left") {
		t.Errorf("three parts: %q", why)
	}
	if rep.Inventory.Source != "2 ResourceSlice(s) from the input files" {
		t.Errorf("inventory: %q", rep.Inventory.Source)
	}

	in, err := scheduler.LoadPaths([]string{filepath.Join("testdata", "cases", "partitioned-slices.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = Run(context.Background(), Options{Inputs: in, KubernetesVersion: "1.35", BuiltinClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	// The API server of 1.35 stores the slices without their counters
	// (DRAPartitionableDevices is off): the parts no longer share the
	// GPU's memory, and check reads them as stored, saying so.
	if c := claim(t, rep, "default/three-parts"); c.Allocation == nil || len(c.Allocation.Devices) != 3 {
		t.Errorf("1.35 three parts: want 3 devices without counters, got %+v %v", c.Allocation, c.Unsatisfiable)
	}
	if notes := strings.Join(rep.Inventory.Notes, " "); !strings.Contains(notes, "read as the API server of Kubernetes 1.35 stores them") {
		t.Errorf("1.35 inventory notes: %q", notes)
	}
}

// With another driver name the built-in classes are rendered as the Helm
// chart renders them, so a claim for the renamed class works.
func TestDriverName(t *testing.T) {
	in := &scheduler.Manifests{}
	err := in.Add("c.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors:
        - cel: {expression: "device.attributes['gpu.example.com'].productName.startsWith('NVIDIA')"}
`))
	if err != nil {
		t.Fatal(err)
	}
	slices, err := fakenodes.Slices(context.Background(), "dgx-a100", 1, "gpu.example.com")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Inputs: in, Slices: slices, DriverName: "gpu.example.com", BuiltinClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := claim(t, rep, "default/c"); c.Allocation == nil || c.Allocation.Devices[0].Driver != "gpu.example.com" || rep.ExitCode != 0 {
		t.Errorf("got %+v, findings %+v", c, rep.Findings)
	}
}

// With another driver name the built-in classes are those the chart
// renders: renamed for the driver, and mapping no extended resources
// (they stay with the installation of the default driver name).
func TestBuiltinClassesForAnotherDriver(t *testing.T) {
	for _, tt := range []struct {
		driver, mig string
		extended    bool
	}{
		{gpu.DefaultDriverName, "mig.gpudra.io", true},
		{"gpu.example.com", "mig.gpu.example.com", false},
	} {
		classes, err := builtinClasses(tt.driver)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		extended := false
		for _, o := range classes {
			dc := o.Obj.(*resourceapi.DeviceClass)
			names[dc.Name] = true
			extended = extended || dc.Spec.ExtendedResourceName != nil
		}
		if !names[tt.driver] || !names[tt.mig] || !names[builtinClassName("mig-1g.10gb.gpudra.io", tt.driver)] || extended != tt.extended {
			t.Errorf("%s: classes %v, extended resource names %v", tt.driver, names, extended)
		}
	}
}

// A device that allows multiple allocations is shared by claims in
// sequence until its capacity is used up: two 30Gi shares of an 80Gi GPU
// fit, a third does not, and the reason is what earlier claims hold.
func TestSequentialShareableDevice(t *testing.T) {
	in, err := scheduler.LoadPaths([]string{filepath.Join("testdata", "cases", "shareable.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := ""
	for _, p := range []string{"a", "b", "c"} {
		pods += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p" + p + "}\nspec:\n  containers: [{name: c, image: x}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: slice-30}]\n"
	}
	if err := in.Add("pods.yaml", []byte(pods)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Inputs: in, Sequential: true, BuiltinClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.Claims {
		if c.Allocation != nil {
			got = append(got, c.Allocation.Devices[0].Device)
		} else {
			got = append(got, "none")
		}
	}
	if !slices.Equal(got, []string{"gpu-0", "gpu-0", "none"}) {
		t.Errorf("shares: %v, want two on gpu-0 and none for the third; findings %+v", got, rep.Findings)
	}
	if why := strings.Join(claim(t, rep, "default/pc-gpu").Unsatisfiable, " "); !strings.Contains(why, "at most 20Gi left; earlier claims consume the rest (default/pa-gpu, default/pb-gpu)") {
		t.Errorf("the third share: %q", why)
	}
}

// A claim exported from a cluster (kubectl get -o yaml) carries the
// allocation the cluster made; check allocates its spec afresh.
func TestClaimWithStatus(t *testing.T) {
	in := &scheduler.Manifests{}
	err := in.Add("claim.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: exported, namespace: team}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io, allocationMode: ExactCount, count: 1}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.gpudra.io, pool: some-other-node, device: gpu-7}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [some-other-node]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, "dgx-h100", 1, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	if c := claim(t, rep, "team/exported"); c.Allocation == nil || c.Allocation.Node != "node-1" {
		t.Errorf("got %+v %v, want an allocation on node-1", c.Allocation, c.Unsatisfiable)
	}
}

// Nine GPUs on two 8-GPU nodes: enough in all, not enough on one node.
func TestNotEnoughOnOneNode(t *testing.T) {
	in := &scheduler.Manifests{}
	err := in.Add("nine.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nine}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.gpudra.io, count: 9}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, "dgx-h100", 2, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	c := claim(t, rep, "default/nine")
	if why := strings.Join(c.Unsatisfiable, " "); !strings.Contains(why, "needs 9 device(s) on one node; 16 match in all, at most 8 on any one node") {
		t.Errorf("explanation: %q", why)
	}
	if rep.Stats.AllocateRuns != 0 {
		t.Errorf("the allocator ran %d times on nodes that cannot fit the claim", rep.Stats.AllocateRuns)
	}
}

// The CEL environment follows --kubernetes-version: allowMultipleAllocations
// (consumable capacity) exists from 1.36 on.
func TestVersionedEnvironment(t *testing.T) {
	doc := []byte(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: single}
spec:
  selectors:
  - cel: {expression: "!device.allowMultipleAllocations"}
`)
	for _, tt := range []struct {
		version string
		compile bool
	}{{"1.34", false}, {"1.35", false}, {"1.36", true}, {"1.37", true}} {
		in := &scheduler.Manifests{}
		if err := in.Add("c.yaml", doc); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), onProfile(t, "dgx-a100", 1, Options{Inputs: in, KubernetesVersion: tt.version}))
		if err != nil {
			t.Fatal(err)
		}
		compiles := len(findings(rep, FindingCompile)) == 0
		if compiles != tt.compile {
			t.Errorf("%s: compiles %v, want %v (%+v)", tt.version, compiles, tt.compile, rep.Findings)
		}
		if rep.KubernetesVersion != tt.version {
			t.Errorf("report version %q", rep.KubernetesVersion)
		}
	}
}

// A template that several pods use is reported once.
func TestFindingsOncePerTemplate(t *testing.T) {
	in, err := scheduler.LoadPaths([]string{filepath.Join("testdata", "cases", "version-as-string.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := ""
	for _, p := range []string{"a", "b", "c"} {
		pods += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p" + p + "}\nspec:\n  containers: [{name: c, image: x}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: ampere-or-newer}]\n"
	}
	if err := in.Add("pods.yaml", []byte(pods)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, "dgx-a100", 1, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(findings(rep, FindingTypeMismatch)); n != 1 {
		t.Errorf("%d type-mismatch findings, want 1", n)
	}
	if n := len(findings(rep, FindingRuntimeError)); n != 1 {
		t.Errorf("%d runtime-error findings, want 1", n)
	}
	if n := len(findings(rep, FindingUnsatisfiable)); n != 3 {
		t.Errorf("%d unsatisfiable findings, want one per pod", n)
	}
}

// TestClaimUsersPast256: pods that share a ResourceClaim past the 256
// entries of its status.reservedFor stay Pending, in input order, and the
// claim is reported once with every pod counted.
func TestClaimUsersPast256(t *testing.T) {
	in := &scheduler.Manifests{}
	doc := "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: shared}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.gpudra.io}}]}}\n"
	for i := range 5 {
		doc += fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d%d}
spec:
  replicas: 60
  selector: {matchLabels: {app: d%d}}
  template:
    metadata: {labels: {app: d%d}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimName: shared}]
      containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
`, i, i, i)
	}
	if err := in.Add("in.yaml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, "dgx-h100", 1, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, p := range rep.Pods {
		if p.Pending {
			pending++
			if !strings.HasPrefix(p.Name, "default/d4-") {
				t.Errorf("pod %s pending, want only the last Deployment's last ones", p.Name)
			}
		}
	}
	if pending != 300-256 {
		t.Errorf("%d pods pending, want %d", pending, 300-256)
	}
	var found []Finding
	for _, f := range rep.Findings {
		if f.Kind == FindingTooManyClaimUsers {
			found = append(found, f)
		}
	}
	if len(found) != 1 || !strings.Contains(found[0].Message, "300 pods share default/shared") {
		t.Errorf("findings %+v, want one saying 300 pods share the claim", found)
	}
}

// TestQuotaUsage: what creating a claim charges, as the API server's
// quota evaluator for ResourceClaims does, and which quota refuses it.
func TestQuotaUsage(t *testing.T) {
	for _, tc := range []struct {
		name, hard, requests, want string
		scoped                     bool
	}{
		{name: "fits", hard: `gpu.gpudra.io.deviceclass.resource.k8s.io/devices: "2"`,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io, count: 2}}]`},
		{name: "allocationMode All counts 32", hard: `gpu.gpudra.io.deviceclass.resource.k8s.io/devices: "8"`,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io, allocationMode: All}}]`, want: "(32)"},
		{name: "firstAvailable counts its largest subrequest", hard: `gpu.gpudra.io.deviceclass.resource.k8s.io/devices: "3"`,
			requests: `[{name: a, firstAvailable: [{name: big, deviceClassName: gpu.gpudra.io, count: 4}, {name: small, deviceClassName: gpu.gpudra.io, count: 2}]}]`, want: "(4)"},
		{name: "the class's extended resource name", hard: `requests.nvidia.com/gpu: "1"`,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io, count: 2}}]`, want: "allows 1 of requests.nvidia.com/gpu"},
		{name: "the implicit name", hard: `requests.deviceclass.resource.kubernetes.io/gpu.gpudra.io: "1"`,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io, count: 2}}]`, want: "(2)"},
		{name: "claim count", hard: `count/resourceclaims.resource.k8s.io: "0"`,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io}}]`, want: "count/resourceclaims.resource.k8s.io"},
		{name: "scoped quotas do not match claims", hard: `gpu.gpudra.io.deviceclass.resource.k8s.io/devices: "0"`, scoped: true,
			requests: `[{name: a, exactly: {deviceClassName: gpu.gpudra.io}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scopes := ""
			if tc.scoped {
				scopes = "\n  scopes: [BestEffort]"
			}
			in := &scheduler.Manifests{}
			doc := fmt.Sprintf("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\nspec:%s\n  hard: {%s}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: %s}}\n", scopes, tc.hard, tc.requests)
			if err := in.Add("in.yaml", []byte(doc)); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), onProfile(t, "dgx-h100", 1, Options{Inputs: in, BuiltinClasses: true}))
			if err != nil {
				t.Fatal(err)
			}
			var got []Finding
			for _, f := range rep.Findings {
				if f.Kind == FindingQuotaExceeded {
					got = append(got, f)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("refused: %s", got[0].Message)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Message, tc.want) || got[0].Object != "ResourceClaim default/c"):
				t.Errorf("findings %+v, want one on ResourceClaim default/c saying %q", got, tc.want)
			case tc.want != "" && claim(t, rep, "default/c").Allocation != nil:
				t.Error("a claim the API server refuses is allocated")
			}
		})
	}
}

// TestNodeNameImplicitExtendedResource: a pod bound by spec.nodeName that
// asks for a class's implicit extended resource is rejected by the
// kubelet's admission (the node lists none of it): an error, the pod
// Pending, and no claim is made for it.
func TestNodeNameImplicitExtendedResource(t *testing.T) {
	in := &scheduler.Manifests{}
	if err := in.Add("in.yaml", []byte(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeName: node-1
  containers:
  - name: c
    image: x
    resources: {limits: {deviceclass.resource.kubernetes.io/gpu.gpudra.io: 1}}
`)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, "dgx-h100", 1, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != FindingNodeNameClaim || rep.Findings[0].Severity != SeverityError ||
		!strings.Contains(rep.Findings[0].Message, "rejects the pod") || rep.Findings[0].Source.Line != 5 {
		t.Errorf("findings %+v, want one node-name-claim error at line 5", rep.Findings)
	}
	if len(rep.Pods) != 1 || !rep.Pods[0].Pending || len(rep.Claims) != 0 {
		t.Errorf("pods %+v, claims %+v: want the pod Pending and no claim", rep.Pods, rep.Claims)
	}
}

// A run tells Options.Progress how far it got in each long stage, item
// by item, and ends each stage with all of it done.
func TestProgressStages(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one, namespace: default}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu.gpudra.io}\n")
	for i := range 3 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%d, namespace: default}\nspec:\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]\n  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]\n", i)
	}
	in := &scheduler.Manifests{}
	if err := in.Add("pods.yaml", []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	type call struct{ done, total int }
	calls := map[string][]call{}
	opts := onProfile(t, "dgx-h100", 1, Options{Inputs: in, BuiltinClasses: true})
	opts.Progress = func(stage string, done, total int) { calls[stage] = append(calls[stage], call{done, total}) }
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pods) != 3 {
		t.Fatalf("%d pods in the report, want 3", len(rep.Pods))
	}
	for _, stage := range []string{"pods evaluated", "pods placed"} {
		got := calls[stage]
		if len(got) == 0 || got[len(got)-1] != (call{3, 3}) {
			t.Errorf("stage %q: calls %v, want them to end at 3/3", stage, got)
			continue
		}
		for i, c := range got {
			if c.total != 3 || c.done > c.total || i > 0 && c.done < got[i-1].done {
				t.Errorf("stage %q: calls %v go back or past the total", stage, got)
				break
			}
		}
	}
}
