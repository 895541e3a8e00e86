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

package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickstart runs quickstart.sh, the README's quick start, with
// stand-ins for kind, kubectl, helm and the image build that record how
// they are called (no Docker here): it makes the cluster and loads the
// image through cluster.sh, as make e2e-kind does, installs the chart on
// fake GPUs with the image it loaded, and waits for a pod with a GPU.
func TestQuickstart(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to run quickstart.sh")
	}
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	stub := "#!/bin/sh\necho \"$(basename \"$0\") $*\" >>" + log + "\ncat >/dev/null 2>&1 </dev/null\n"
	for _, name := range []string{"kind", "kubectl", "helm", "image.sh"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "quickstart.sh")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GPUDRA_IMAGE_SH="+filepath.Join(bin, "image.sh"), "KIND=", "KUBECTL=", "HELM=", "IMAGE=", "KIND_CLUSTER=", "KIND_NODE_IMAGE=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("quickstart.sh: %v\n%s", err, out)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSpace(string(data)), "\n")
	// Each step in order, by the words its call must hold.
	want := [][]string{
		{"kind create cluster", "--name gpudra", "kind-config.yaml", "--wait"},
		{"image.sh", "gpudra.tar", "localhost/gpudra:quickstart"},
		{"kind load image-archive", "gpudra.tar", "--name gpudra"},
		{"kubectl", "label namespace gpudra pod-security.kubernetes.io/enforce=privileged"},
		{"helm upgrade --install gpudra", "--set deviceBackend=fake", "--set kubeletPlugin.runOnControlPlane=true",
			"--set image.repository=localhost/gpudra", "--set image.tag=quickstart", "--set image.pullPolicy=Never"},
		{"kubectl", "get resourceslices"},
		{"kubectl", "wait --for=condition=Ready pod/gpu-test"},
	}
	i := 0
	for _, c := range calls {
		if i < len(want) && containsAll(c, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("quickstart.sh never made the call %q (in order); its calls:\n%s", want[i], data)
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "kind ") || strings.HasPrefix(c, "kubectl ") || strings.HasPrefix(c, "helm ") {
			if !strings.Contains(c, "gpudra") {
				t.Errorf("call %q does not name the quick start's cluster, context or release", c)
			}
		}
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
