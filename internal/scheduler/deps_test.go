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

package scheduler

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoPluginGRPCOrNVML keeps the offline scheduler core and gpudra check
// free of the kubelet plugin, gRPC and NVML (cgo): the controller links
// them into a small binary, and gpudra check must not need a GPU library.
// The inventory of fake nodes is built elsewhere (internal/fakenodes) and
// handed in as ResourceSlices; so is a live cluster's (gpudra check
// --cluster reads it with internal/clusterread): neither package loads a
// kubeconfig or talks to an API server.
func TestNoPluginGRPCOrNVML(t *testing.T) {
	// go test puts the go command that runs it first on PATH.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"k8s.io/dynamic-resource-allocation/kubeletplugin",
		"google.golang.org/grpc",
		"github.com/NVIDIA/go-nvml",
		"github.com/gpudra/gpudra/internal/plugin",
		"github.com/gpudra/gpudra/internal/backend",
		"github.com/gpudra/gpudra/internal/simulate",
		"github.com/gpudra/gpudra/internal/clusterread",
	}
	// Kubeconfig loading; client-go's REST client itself comes with the
	// DRA libraries (and its clientcmd/api types with it).
	forbiddenExact := []string{"k8s.io/client-go/tools/clientcmd"}
	for _, pkg := range []string{"github.com/gpudra/gpudra/internal/scheduler", "github.com/gpudra/gpudra/internal/check"} {
		out, err := exec.Command(goCmd, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s must not depend on %s", pkg, dep)
				}
			}
			for _, f := range forbiddenExact {
				if dep == f {
					t.Errorf("%s must not depend on %s", pkg, dep)
				}
			}
		}
	}
}
