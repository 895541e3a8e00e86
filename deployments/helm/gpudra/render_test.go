//go:build chart

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

package chart

// Tests over the manifests helm renders, and over the alert rules as
// promtool reads them. They need helm (HELM) and promtool (PROMTOOL):
// hack/chart-check.sh runs them with both (make chart-check, part of make
// test); the build tag keeps them out of a plain go test ./...

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	release   = "gpudra"
	namespace = "gpudra"
)

// tool is the binary an environment variable names; the test fails
// without it (these tests must run where chart-check runs them).
func tool(t *testing.T, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: run these tests through hack/chart-check.sh (make chart-check)", env)
	}
	return path
}

// render runs helm template on the chart with the arguments and returns
// the manifests.
func render(t *testing.T, args ...string) string {
	t.Helper()
	out, err := renderErr(t, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// renderErr is render for values that may be refused.
func renderErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	base := []string{"template", release, ".", "--namespace", namespace}
	if v := os.Getenv("KUBE_VERSION"); v != "" {
		base = append(base, "--kube-version", v)
	}
	cmd := exec.Command(tool(t, "HELM"), append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &renderError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type renderError struct {
	err    error
	stderr string
}

func (e *renderError) Error() string { return e.err.Error() + ": " + e.stderr }

// object is one rendered manifest.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }

func (o object) name() string { return o.str("metadata", "name") }

// get walks maps by key.
func (o object) get(path ...string) any {
	var cur any = map[string]any(o)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func (o object) str(path ...string) string { s, _ := o.get(path...).(string); return s }

func (o object) labels() map[string]any {
	m, _ := o.get("metadata", "labels").(map[string]any)
	return m
}

// objects splits rendered manifests into objects.
func objects(t *testing.T, manifests string) []object {
	t.Helper()
	var out []object
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered manifest does not parse: %v\n%s", err, doc)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// ofKind returns the objects of a kind, by name.
func ofKind(objs []object, kind string) map[string]object {
	out := map[string]object{}
	for _, o := range objs {
		if o.kind() == kind {
			out[o.name()] = o
		}
	}
	return out
}

// writeFile writes a test file.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTestdata copies testdata/promtool into dir.
func copyTestdata(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/promtool/*")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, filepath.Base(f)), raw)
		if strings.HasSuffix(f, "_test.yaml") {
			tests = append(tests, filepath.Base(f))
		}
	}
	return tests
}

// promtool runs promtool in dir.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(tool(t, "PROMTOOL"), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
