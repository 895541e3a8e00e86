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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// runScript runs hack/gpu-check.sh with this test binary as gpudra.
func runScript(t *testing.T, env ...string) (int, string) {
	t.Helper()
	hook := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "gpu-check.sh"))
	cmd.Env = append(os.Environ(), "GPUDRA="+os.Args[0], runAsGpudra+"=1", "GPUDRA_CDI_HOOK="+hook)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// gpuState is the fake GPUs' state as the fake keeps it across restarts
// (MIG mode, instances, compute modes, time slices, health, telemetry);
// the fake backend's scaffolding beside it (its sysfs tree, its driver
// installation) is left out.
func gpuState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"nvmlfake-state.json", "nvmlfake-telemetry.json"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b.WriteString(f + ":\n" + string(data) + "\n")
	}
	return b.String()
}

// TestGPUCheckScript runs make gpu-check's script end to end on fake GPUs:
// the report says every step passed on a node like the profile; on a node
// an admin changed (MIG mode, an instance, a compute mode) the check
// reports the instance and its MIG device, and leaves every file of the
// GPUs' state as it was; with no GPU it refuses.
func TestGPUCheckScript(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.md")
	args := "GPU_CHECK_ARGS=--health 1s --node-name gpu-node --fake-state-dir " + filepath.Join(dir, "state")
	code, out := runScript(t, "GPU_CHECK_FAKE_PROFILE=dgx-h100", "GPU_CHECK_REPORT="+report, args)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{
		"# gpudra gpu-check on ", ": passed",
		"| backend | fake, driver root `/` |",
		"| GPUs | 8 |",
		"| fake profile compared | dgx-h100 |",
		"calls that would change a GPU refused: 0",
		"no differences from fake profile dgx-h100",
		"8 device(s), ",
		"all exist",
		"the watch ran 1s; 0 event(s)",
		"gpu-0 1g.10gb: profile ID 19, 1 compute slice(s)",
		"placements 0+1 1+1 2+1 3+1 4+1 5+1 6+1",
		"none refused",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "| fail |") {
		t.Errorf("a step failed:\n%s", text)
	}

	// An admin's MIG instance and compute mode on gpu-1.
	state := filepath.Join(dir, "admin")
	srv, err := nvmlfake.New(nvmlfake.Options{Profile: "dgx-h100", NodeName: "gpu-node", StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	srv.Init()
	if err := nvmlfake.AdminMIG(srv, 1, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4, 4); err != nil {
		t.Fatal(err)
	}
	d2, _ := srv.DeviceGetHandleByIndex(2)
	if ret := d2.SetComputeMode(nvml.COMPUTEMODE_EXCLUSIVE_PROCESS); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	srv.Shutdown()
	before := gpuState(t, state)
	if !strings.Contains(before, `"MIG`) && !strings.Contains(before, "mig") {
		t.Fatalf("the admin's changes are not in the state file:\n%s", before)
	}
	code, out = runScript(t, "GPU_CHECK_FAKE_PROFILE=dgx-h100", "GPU_CHECK_REPORT="+report,
		"GPU_CHECK_ARGS=--health 1s --node-name gpu-node --fake-state-dir "+state)
	if code != 0 {
		t.Errorf("a node with an admin's MIG instance: exit %d\n%s", code, out)
	}
	if after := gpuState(t, state); after != before {
		t.Errorf("gpu-check changed the fake GPUs' state:\nbefore %s\nafter %s", before, after)
	}
	data, _ = os.ReadFile(report)
	text = string(data)
	for _, want := range []string{"MIG capable true (enabled true)", "gpu-1: existing GPU instance", "at 4+4", "9 device(s), ", "none refused"} {
		if !strings.Contains(text, want) {
			t.Errorf("report on the admin's node lacks %q:\n%s", want, text)
		}
	}

	// No GPU: refused, nothing run, no report.
	none := filepath.Join(dir, "none.md")
	code, out = runScript(t, "GPU_CHECK_DEVICE_NODE="+filepath.Join(dir, "no-nvidiactl"), "GPU_CHECK_REPORT="+none, "GPU_CHECK_FAKE_PROFILE=")
	if code != 3 || !strings.Contains(out, "no NVIDIA GPU on this machine") {
		t.Errorf("no GPU: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(none); err == nil {
		t.Error("a report was written on a machine without a GPU")
	}
}

// TestGPUCheckCommand: -o json is the report; NVML that cannot be opened
// exits 3.
func TestGPUCheckCommand(t *testing.T) {
	code, out, errOut := runRoot(t, "gpudra", "", "gpu-check", "--device-backend", "fake", "--fake-profile", "mixed", "--health", "100ms", "--nvidia-cdi-hook-path", "/bin/sh", "-o", "json")
	if code != 0 || !strings.Contains(out, `"passed": true`) || !strings.Contains(out, `"profile": "mixed"`) {
		t.Errorf("gpu-check -o json on fake mixed: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runRoot(t, "gpudra", "", "gpu-check", "--driver-root", t.TempDir())
	if code != exitFailure || !strings.Contains(errOut, "libnvidia-ml") {
		t.Errorf("gpu-check without NVML: exit %d, %s", code, errOut)
	}
	if code, _, _ := runRoot(t, "gpudra", "", "gpu-check", "--device-backend", "fake", "--fake-profile", "dgx-z9"); code != exitUsage {
		t.Errorf("a bad --fake-profile: exit %d, want 2", code)
	}
}
