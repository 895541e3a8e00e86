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
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// TestKindConfig loads kind-config.yaml the way kind does (strict YAML into
// its v1alpha4 types, then its defaults) and checks what DRA needs.
func TestKindConfig(t *testing.T) {
	data, err := os.ReadFile("kind-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("kind-config.yaml is not a valid kind v1alpha4 Cluster: %v", err)
	}
	v1alpha4.SetDefaultsCluster(&c)
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("kind/apiVersion = %s/%s", c.Kind, c.APIVersion)
	}
	if len(c.Nodes) != 1 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole {
		t.Errorf("want one control-plane node (it runs the test pods), got %+v", c.Nodes)
	}
	if img := c.Nodes[0].Image; !strings.HasPrefix(img, "kindest/node:v1.37.") {
		t.Errorf("node image %q: want kindest/node:v1.37.x, the version make e2e-local tests", img)
	}
	if !c.FeatureGates["DRAPartitionableDevices"] {
		t.Error("feature gate DRAPartitionableDevices not enabled")
	}
	patches := strings.Join(c.ContainerdConfigPatches, "\n")
	for _, want := range []string{`[plugins."io.containerd.cri.v1.runtime"]`, "enable_cdi = true", `"/var/run/cdi"`} {
		if !strings.Contains(patches, want) {
			t.Errorf("containerd patches lack %s", want)
		}
	}
}
