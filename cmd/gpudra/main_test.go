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
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/version"
)

// runAsGpudra makes this test binary gpudra itself (TestMain), for the
// tests that run scripts which call gpudra.
const runAsGpudra = "GPUDRA_TEST_RUN_AS_GPUDRA"

func TestMain(m *testing.M) {
	if os.Getenv(runAsGpudra) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runRoot runs the whole gpudra command line as main does and returns its
// exit status, standard output and standard error.
func runRoot(t *testing.T, invokedAs, stdin string, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCommand(invokedAs)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	code := execute(context.Background(), root, &errOut)
	return code, out.String(), errOut.String()
}

// subcommands are the commands a user runs, without cobra's help and
// completion.
func subcommands(root *cobra.Command) []*cobra.Command {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c)
		}
	}
	return out
}

// TestConventions: every subcommand exits 2 for a bad flag, says its exit
// statuses in its help, and takes -o json and -o yaml.
func TestConventions(t *testing.T) {
	root := newRootCommand("gpudra")
	subs := subcommands(root)
	if len(subs) < 5 {
		t.Fatalf("only %d subcommands", len(subs))
	}
	for _, c := range subs {
		t.Run(c.Name(), func(t *testing.T) {
			code, out, errOut := runRoot(t, "gpudra", "", c.Name(), "--no-such-flag")
			if code != exitUsage || !strings.Contains(errOut, "unknown flag: --no-such-flag; see gpudra "+c.Name()+" --help") {
				t.Errorf("bad flag: exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if !strings.Contains(c.Long, "Exit status") {
				t.Errorf("%s --help does not say its exit statuses", c.Name())
			}
			formats := strings.Split(c.Annotations[outputFormatsAnnotation], ",")
			if c.Flags().ShorthandLookup("o") == nil || !contains(formats, "json") || !contains(formats, "yaml") {
				t.Errorf("-o json|yaml missing: formats %v", formats)
			}
			if code, _, errOut := runRoot(t, "gpudra", "", c.Name(), "-o", "xml"); code != exitUsage || !strings.Contains(errOut, `-o "xml": want`) {
				t.Errorf("-o xml: exit %d, stderr %s", code, errOut)
			}
		})
	}
	if code, _, errOut := runRoot(t, "gpudra", "", "chek"); code != exitUsage || !strings.Contains(errOut, "did you mean check?") {
		t.Errorf("unknown command: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := runRoot(t, "gpudra", "", "version", "extra"); code != exitUsage || !strings.Contains(errOut, "see gpudra version --help") {
		t.Errorf("extra argument: exit %d, stderr %s", code, errOut)
	}
	if code, out, _ := runRoot(t, "gpudra", ""); code != exitOK || !strings.Contains(out, "Exit status") && !strings.Contains(out, "exits with one of") {
		t.Errorf("no arguments: exit %d, want the help:\n%s", code, out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestVersion(t *testing.T) {
	want := version.Get()
	code, out, _ := runRoot(t, "gpudra", "", "version")
	if code != 0 || out != "gpudra "+want.String()+"\n" {
		t.Errorf("gpudra version: exit %d, %q", code, out)
	}
	if _, out, _ := runRoot(t, "gpudra", "", "--version"); out != "gpudra "+want.String()+"\n" {
		t.Errorf("gpudra --version: %q", out)
	}
	for _, format := range []string{"json", "yaml"} {
		_, out, _ := runRoot(t, "gpudra", "", "version", "-o", format)
		var got version.Info
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(out), &got)
		} else {
			err = yaml.UnmarshalStrict([]byte(out), &got)
		}
		if err != nil || got != want {
			t.Errorf("version -o %s: %+v, %v\n%s", format, got, err, out)
		}
	}
}

// TestKubectlPlugin: as kubectl-gpudra the help and errors say "kubectl
// gpudra", as kubectl users type it.
func TestKubectlPlugin(t *testing.T) {
	code, out, _ := runRoot(t, kubectlPluginName, "", "--help")
	if code != 0 || !strings.Contains(out, "kubectl gpudra [command]") {
		t.Errorf("kubectl gpudra --help: exit %d\n%s", code, out)
	}
	if _, out, _ := runRoot(t, kubectlPluginName, "", "--version"); !strings.HasPrefix(out, "kubectl gpudra ") {
		t.Errorf("kubectl gpudra --version: %q", out)
	}
	if code, _, errOut := runRoot(t, kubectlPluginName, "", "version", "--bad"); code != 2 || !strings.Contains(errOut, "see kubectl gpudra version --help") {
		t.Errorf("kubectl gpudra version --bad: exit %d, %s", code, errOut)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runRoot(t, "gpudra", "", "completion", shell)
		if code != 0 || !strings.Contains(out, "gpudra") {
			t.Errorf("completion %s: exit %d, %d bytes; %s", shell, code, len(out), errOut)
		}
	}
	if code, _, _ := runRoot(t, "gpudra", "", "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	// Completing -o offers the command's formats.
	_, out, _ := runRoot(t, "gpudra", "", cobra.ShellCompRequestCmd, "check", "-o", "")
	for _, f := range []string{"text", "json", "yaml"} {
		if !strings.Contains(out, f+"\n") {
			t.Errorf("completion of check -o lacks %s:\n%s", f, out)
		}
	}
}

// TestStdin: every command that reads manifests reads - as standard input.
func TestStdin(t *testing.T) {
	claim := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: v1
kind: Pod
metadata: {name: pod, namespace: default}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: one}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpu}]}
`
	if code, out, errOut := runRoot(t, "gpudra", claim, "check", "-"); code != 0 || !strings.Contains(out, "ALLOCATED") {
		t.Errorf("check -: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runRoot(t, "gpudra", claim, "migrate", "-"); code != 0 || !strings.Contains(out, "name: one") {
		t.Errorf("migrate -: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := runRoot(t, "gpudra", claim, "simulate", "--manifests", "-", "-o", "json")
	var sim simulation
	if err := json.Unmarshal([]byte(out), &sim); code != 0 || err != nil {
		t.Fatalf("simulate --manifests -: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if len(sim.Examples) != 1 || len(sim.Examples[0].Pods) != 1 || len(sim.Examples[0].Pods[0].Claims[0].Devices) != 1 {
		t.Errorf("simulate --manifests -: %+v", sim.Examples)
	}
	if code, _, errOut := runRoot(t, "gpudra", "kind: DeviceClass\n", "simulate", "--manifests", "-"); code != exitUsage || !strings.Contains(errOut, "no claims, templates or pods") {
		t.Errorf("simulate of classes alone: exit %d, %s", code, errOut)
	}
}

// TestErrorEscaped: an error can quote cluster data (an object's name, an
// attribute); what is not printable in it is escaped on standard error,
// and its lines stay lines.
func TestErrorEscaped(t *testing.T) {
	root := &cobra.Command{Use: "gpudra", SilenceErrors: true, SilenceUsage: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("claim \"a\rgpudra: all clear\x1b[2J\" refused\nsecond line")
		}}
	var errOut bytes.Buffer
	root.SetErr(&errOut)
	root.SetArgs(nil)
	if code := execute(context.Background(), root, &errOut); code != exitFailure {
		t.Errorf("exit status %d, want %d", code, exitFailure)
	}
	if got, want := errOut.String(), "gpudra: claim \"a\\rgpudra: all clear\\x1b[2J\" refused\nsecond line\n"; got != want {
		t.Errorf("standard error %q, want %q", got, want)
	}
}
