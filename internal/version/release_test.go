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
// build one the chart pulls: make image tags the git-describe version
// (hack/version.sh version) and, for `helm install deployments/helm/gpudra`
// from a checkout, the source chart's appVersion, which the Dockerfile's
// VERSION defaults to. (A README install that built :dev while the chart
// pulled :0.1.0 ended in ImagePullBackOff.) make chart and make release
// stamp the describe version into the packaged chart instead.
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

	if v := versionSh(t, root, nil, "chart-version"); v != chart.AppVersion {
		t.Errorf("hack/version.sh chart-version = %q, the chart's appVersion is %q", v, chart.AppVersion)
	}
	version := versionSh(t, root, nil, "version")

	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "-n", "image")
	for _, kv := range os.Environ() { // what a plain `make image` uses
		if !strings.HasPrefix(kv, "IMAGE=") && !strings.HasPrefix(kv, "VERSION=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n image: %v", err)
	}
	described := values.Image.Repository + ":" + version
	if !strings.Contains(string(out), "hack/image.sh bin/gpudra-image.tar "+described) {
		t.Errorf("make image does not tag %s (the build's version):\n%s", described, out)
	}
	if version != chart.AppVersion && !strings.Contains(string(out), "IMAGE_ALSO_TAG="+chartImage+" ") {
		t.Errorf("make image does not also tag %s, the image the source chart pulls:\n%s", chartImage, out)
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

// TestVersionFromGit runs hack/version.sh in a repository of its own
// through a release's life: no tag, the tag, commits after it,
// uncommitted changes, VERSION given, and no git at all.
func TestVersionFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git: %v", err)
	}
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join(dir, "deployments", "helm", "gpudra")
	for _, d := range []string{filepath.Join(dir, "hack"), chartDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	chartYAML := filepath.Join(chartDir, "Chart.yaml")
	if err := os.WriteFile(chartYAML, []byte("name: gpudra\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := versionSh(t, dir, nil, "version"); v != "0.1.0" {
		t.Errorf("outside git: version %q, want the source chart's appVersion 0.1.0", v)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	git("commit", "-q", "--allow-empty", "-m", "two")
	short := func() string { return git("rev-parse", "--short=12", "HEAD") }
	dirty := false
	for _, tc := range []struct {
		name, setup, env, want string
	}{
		{name: "no release tag", want: "0.0.0-2-g" + short()},
		{name: "a tag that is no release", setup: "nightly", want: "0.0.0-2-g" + short()},
		{name: "on the tag", setup: "tag", want: "0.2.0"},
		{name: "commits after the tag", setup: "commit", want: "0.2.0-1-g"},
		{name: "uncommitted changes", setup: "dirty", want: "0.2.0-1-g"},
		{name: "VERSION given", env: "v1.2.3-rc.1", want: "1.2.3-rc.1"},
	} {
		switch tc.setup {
		case "nightly":
			git("tag", "nightly")
		case "tag":
			git("tag", "-a", "v0.2.0", "-m", "v0.2.0")
		case "commit":
			git("commit", "-q", "--allow-empty", "-m", "three")
			tc.want += short()
		case "dirty":
			if err := os.WriteFile(chartYAML, []byte("name: gpudra\ndescription: changed\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.want += short() + "-dirty"
			dirty = true
		}
		var env []string
		if tc.env != "" {
			env = []string{"VERSION=" + tc.env}
		}
		if v := versionSh(t, dir, env, "version"); v != tc.want {
			t.Errorf("%s: version %q, want %q", tc.name, v, tc.want)
		}
		if r := versionSh(t, dir, nil, "revision"); !strings.HasPrefix(r, git("rev-parse", "HEAD")) || strings.HasSuffix(r, "-dirty") != dirty {
			t.Errorf("%s: revision %q", tc.name, r)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "hack", "version.sh"), "version")
	cmd.Env = append(os.Environ(), "VERSION=latest")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "MAJOR.MINOR.PATCH") {
		t.Errorf("VERSION=latest: %v, %q; want a refusal that says the form", err, out)
	}
}

// versionSh runs root's hack/version.sh with VERSION and REVISION unset
// but for env.
func versionSh(t *testing.T, root string, env []string, what string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "version.sh"), what)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERSION=") && !strings.HasPrefix(kv, "REVISION=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/version.sh %s in %s: %v\n%s", what, root, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
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
