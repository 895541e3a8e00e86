package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

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
