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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/fakenodes"
)

// The build without cgo cannot import fakenodes: check's default profile
// is spelled out, and must stay fakenodes'.
func TestDefaultFakeProfile(t *testing.T) {
	if defaultFakeProfile != fakenodes.DefaultProfile {
		t.Errorf("defaultFakeProfile = %q, fakenodes.DefaultProfile = %q", defaultFakeProfile, fakenodes.DefaultProfile)
	}
}

func runGpudra(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newInventoryCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// TestInventory: inventory prints the slices the plugin publishes (here
// for the fake backend: no GPU on this machine), and compares them with
// a fake profile.
func TestInventory(t *testing.T) {
	out, _, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "mixed", "--node-name", "gpu-node-7")
	if err != nil {
		t.Fatal(err)
	}
	devices := 0
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatalf("output is not ResourceSlices: %v\n%s", err, doc)
		}
		if s.Spec.Pool.Name != "gpu-node-7" || s.Spec.Driver != "gpu.gpudra.io" {
			t.Errorf("slice %s: pool %s, driver %s", s.Name, s.Spec.Pool.Name, s.Spec.Driver)
		}
		devices += len(s.Spec.Devices)
	}
	if devices == 0 {
		t.Fatal("no devices printed")
	}

	if _, stderr, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "dgx-h100", "--compare", "dgx-h100", "--output", "none"); err != nil {
		t.Errorf("a node compared with its own profile: %v\n%s", err, stderr)
	}
	stdout, _, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "dgx-h200", "--compare", "dgx-h100", "--output", "none")
	var exit exitError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Errorf("an H200 node compared with dgx-h100: err %v, want exit status 1", err)
	}
	if !strings.Contains(stdout, `attribute productName is "NVIDIA H200" here, "NVIDIA H100 80GB HBM3" in the comparison`) {
		t.Errorf("comparison output:\n%s", stdout)
	}
}

// TestInventoryNVLinkDomain: inventory says where the node stands in a
// multi-node NVLink fabric, and the GPUs of a tray carry the domain.
func TestInventoryNVLinkDomain(t *testing.T) {
	out, _, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "gb200-tray", "--node-name", "tray-4")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# NVLink domain 00000001-0000-0000-0000-000000000001.2\n") ||
		!strings.Contains(out, "nvlinkDomain:\n        string: 00000001-0000-0000-0000-000000000001.2") {
		t.Errorf("a GB200 tray's inventory does not show its domain:\n%s", out)
	}
	out, _, err = runGpudra(t, "--device-backend", "fake", "--fake-profile", "dgx-h100", "--output", "none")
	if err != nil {
		t.Fatal(err)
	}
	if out != "# no multi-node NVLink fabric\n" {
		t.Errorf("a DGX H100's inventory -o none: %q", out)
	}
	_, stderr, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "gb200-tray", "--output", "json")
	if err != nil || !strings.Contains(stderr, "# NVLink domain 00000001-0000-0000-0000-000000000001.2") {
		t.Errorf("-o json: the domain on stderr: %q, %v", stderr, err)
	}
}

// TestInventoryRoundTrip: what gpudra inventory prints, gpudra check reads
// as the node: the same devices match each class and request, and every
// claim gets the same devices, as on the fake profile it was taken from;
// in YAML and in JSON.
func TestInventoryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join("..", "..", "internal", "check", "testdata", "corpus", "nvlink-mixed-node.yaml")
	examples := filepath.Join("..", "..", "deviceclasses", "examples")
	_, want, _ := runCommand(t, newCheckCommand(), "", "-o", "json", "--sequential", "--profile", "mixed", examples, manifests)
	for _, format := range []string{"yaml", "json"} {
		out, _, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "mixed", "--node-name", "node-1", "--output", format)
		if err != nil {
			t.Fatal(err)
		}
		inv := filepath.Join(dir, "node-1."+format)
		if err := os.WriteFile(inv, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		_, got, errOut := runCommand(t, newCheckCommand(), "", "-o", "json", "--sequential", inv, examples, manifests)
		if g, w := selected(t, got), selected(t, want); g == "" || g != w {
			t.Errorf("%s: check on the inventory selects\n%s\nwant (on profile mixed)\n%s\nstderr: %s", format, g, w, errOut)
		}
	}
}

// selected is what a check report selects and allocates, without where
// the inventory came from.
func selected(t *testing.T, report string) string {
	t.Helper()
	var rep struct {
		Classes []struct {
			Name    string          `json:"name"`
			Matches json.RawMessage `json:"matches"`
		} `json:"classes"`
		Claims []struct {
			Name       string          `json:"name"`
			Requests   json.RawMessage `json:"requests"`
			Allocation json.RawMessage `json:"allocation"`
		} `json:"claims"`
	}
	if err := json.Unmarshal([]byte(report), &rep); err != nil {
		t.Fatalf("%v\n%s", err, report)
	}
	b, err := json.MarshalIndent(struct{ Classes, Claims any }{rep.Classes, rep.Claims}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInventoryRefill (issue 30, item 3): a --sequential check over what
// gpudra inventory prints refills the MIG spare as one over the profile
// does: a second 7g.80gb pod takes the GPU the first one's prepare makes
// a spare, and both checks allocate the same devices.
func TestInventoryRefill(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "pods.yaml")
	pod := func(name string) string {
		return `---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimTemplateName: big}]
`
	}
	doc := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big}
spec:
  spec:
    devices:
      requests:
      - {name: mig, exactly: {deviceClassName: mig-7g.80gb.gpudra.io}}
` + pod("first") + pod("second")
	if err := os.WriteFile(manifests, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want, _ := runCommand(t, newCheckCommand(), "", "-o", "json", "--sequential", "--profile", "dgx-h100", manifests)
	out, _, err := runGpudra(t, "--device-backend", "fake", "--fake-profile", "dgx-h100", "--node-name", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "node-1.yaml")
	if err := os.WriteFile(inv, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, got, errOut := runCommand(t, newCheckCommand(), "", "-o", "json", "--sequential", inv, manifests)
	if code != 0 {
		t.Errorf("exit %d: %s\n%s", code, errOut, got)
	}
	if g, w := selected(t, got), selected(t, want); g != w || !strings.Contains(g, "gpu-6-mig-7g80gb-0") {
		t.Errorf("check on the inventory selects\n%s\nwant (on profile dgx-h100, the second pod on gpu-6)\n%s", g, w)
	}
	if !strings.Contains(got, "modelled by editing the published slices") {
		t.Errorf("the report does not say how the refill is modelled:\n%s", got)
	}
}
