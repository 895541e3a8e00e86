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

package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestImageTagsAgree keeps the image that make image and the Dockerfile
// build the one the chart pulls by default: the chart's appVersion is the
// release, hack/version.sh reads it, the Makefile tags the image with it,
// and the Dockerfile's VERSION defaults to it. (A README install that
// built :dev while the chart pulled :0.1.0 ended in ImagePullBackOff.)
func TestImageTagsAgree(t *testing.T) {
	root := filepath.Join("..", "..")
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(root, "deployments", "helm", "gpudra", "Chart.yaml"), &chart)
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	readYAML(t, filepath.Join(root, "deployments", "helm", "gpudra", "values.yaml"), &values)
	if chart.AppVersion == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	if values.Image.Tag != "" {
		t.Errorf("values.yaml sets image.tag %q: leave it empty so the chart pulls its appVersion %s, the tag make image builds", values.Image.Tag, chart.AppVersion)
	}
	chartImage := values.Image.Repository + ":" + chart.AppVersion

	out, err := exec.Command(filepath.Join(root, "hack", "version.sh"), "version").Output()
	if err != nil {
		t.Fatalf("hack/version.sh version: %v", err)
	}
	if v := strings.TrimSpace(string(out)); v != chart.AppVersion {
		t.Errorf("hack/version.sh version = %q, the chart's appVersion is %q", v, chart.AppVersion)
	}

	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "image-name")
	for _, kv := range os.Environ() { // what a plain `make image` uses
		if !strings.HasPrefix(kv, "IMAGE=") && !strings.HasPrefix(kv, "VERSION=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("make image-name: %v", err)
	}
	if img := strings.TrimSpace(string(out)); img != chartImage {
		t.Errorf("make image tags %q, the chart pulls %q", img, chartImage)
	}

	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARG VERSION=(\S+)$`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatal("the Dockerfile has no ARG VERSION=<default>")
	}
	if string(m[1]) != chart.AppVersion {
		t.Errorf("the Dockerfile's VERSION defaults to %s, the chart's appVersion is %s", m[1], chart.AppVersion)
	}
	if !strings.Contains(string(dockerfile), "-t "+chartImage+" ") {
		t.Errorf("the Dockerfile's docker build example does not tag %s", chartImage)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
