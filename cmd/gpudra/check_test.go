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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCLI runs `gpudra check args...` and returns its exit status and
// output.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runCommand(t, newCheckCommand(), stdin, args...)
}

// runCommand runs a gpudra subcommand with args and stdin as main runs the
// command line (its conventions for bad flags included), and returns its
// exit status, standard output and standard error.
func runCommand(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	code := execute(context.Background(), cmd, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheckCommandExitStatus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel:
              expression: device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0
`)
	noCluster := write("kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`)
	wrong := write("wrong.yaml", strings.Replace(mustRead(t, good), "device.capacity", "device.attributes", 1))
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		output string // in stdout (code 0, 1) or stderr (code 2, 3)
	}{
		{"clean", []string{"--profile", "dgx-a100", good}, "", 0, "ALLOCATED on node-1: gpu=gpu-0"},
		{"examples", []string{"--examples"}, "", 0, "no findings"},
		{"finding", []string{"--profile", "dgx-a100", wrong}, "", 1, "use device.capacity['gpu.gpudra.io'].memory"},
		{"stdin", []string{"--profile", "dgx-a100", "-"}, mustRead(t, wrong), 1, "capacity-as-attribute"},
		{"empty file", []string{write("empty.yaml", "")}, "", 2, "empty.yaml: the file is empty"},
		{"malformed", []string{write("bad.yaml", "kind: [\n")}, "", 2, "malformed YAML"},
		{"unknown kind", []string{write("kind.yaml", "apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n")}, "", 1, "v1 has no kind Gadget"},
		{"custom resource beside a claim", []string{write("cr.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"), good}, "", 0, "Gadget (example.com/v1) g: a custom resource"},
		{"no such file", []string{filepath.Join(dir, "nope.yaml")}, "", 2, "no such file"},
		{"no args", nil, "", 2, "give YAML files"},
		{"bad version", []string{"--kubernetes-version", "1.20", good}, "", 2, "not supported"},
		{"bad output", []string{"-o", "xml", good}, "", 2, "want text, json, yaml"},
		{"bad profile", []string{"--profile", "dgx-z9", good}, "", 2, `--profile dgx-z9: fake backend: nvmlfake: unknown profile "dgx-z9"`},
		{"bad nodes", []string{"--nodes", "0", good}, "", 2, "--nodes must be at least 1"},
		{"bad flag", []string{"--profil", "dgx-a100", good}, "", 2, "unknown flag: --profil"},
		{"bad flag value", []string{"--nodes", "two", good}, "", 2, `invalid argument "two" for "--nodes"`},
		{"strict: a warning fails", []string{"--strict", "--profile", "dgx-a100", write("cr2.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"), good}, "", 1, "exit status 1 (--strict): warnings count"},
		{"bad consumable-capacity sharing", []string{"--consumable-capacity-sharing", "Both", good}, "", 2, "unknown sharing"},
		// A cluster that does not answer (port 1 on this host refuses): the
		// command could not do its work, 3, as gpudra --help says.
		{"cluster not reachable", []string{"--cluster", "--kubeconfig", noCluster, good}, "", 3, "--cluster: list deviceclasses"},
		{"dry run not reachable", []string{"--server-dry-run", "--kubeconfig", noCluster, good}, "", 3, "--server-dry-run: "},
		{"no kubeconfig", []string{"--cluster", "--kubeconfig", filepath.Join(dir, "nope.kubeconfig"), good}, "", 3, "--cluster: kubeconfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			where := out
			if code >= 2 {
				where = errOut
			}
			if !strings.Contains(where, tt.output) {
				t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", tt.output, out, errOut)
			}
		})
	}

	// -o json is a Report with the same exit status.
	code, out, _ := runCLI(t, "", "-o", "json", "--profile", "mixed", wrong)
	var rep struct {
		ExitCode int `json:"exitCode"`
		Findings []struct {
			Kind string `json:"kind"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if code != 1 || rep.ExitCode != 1 || len(rep.Findings) == 0 {
		t.Errorf("-o json: exit %d, report %+v", code, rep)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
