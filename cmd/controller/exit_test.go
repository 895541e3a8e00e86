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
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

func TestMain(m *testing.M) {
	gpudratest.RunMainIfAsked(main)
	os.Exit(m.Run())
}

// TestHelp: --help describes the controller and groups its flags.
func TestHelp(t *testing.T) {
	_, cmd := newFlags()
	gpudratest.CheckHelp(t, cmd, "Cluster", "Leader election", "Admission webhook", "Fleet", "Metrics and memory")
}

// TestExitStatus: the exit statuses --help and the README promise, from
// the binary's own main: 0 for --version and --help, 2 for a bad command
// line or environment, 1 for a failure at run time.
func TestExitStatus(t *testing.T) {
	// Nothing here may reach a cluster or keep a port: the run-time
	// failure is a kubeconfig that does not exist.
	quiet := []string{"--metrics-address=127.0.0.1:0", "--webhook-address="}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		output string // in stdout for 0, in stderr otherwise
	}{
		{name: "version", args: []string{"--version"}, code: 0, output: "gpudra-controller "},
		{name: "unknown flag", args: []string{"--no-such-flag"}, code: 2, output: "unknown flag: --no-such-flag"},
		{name: "a value that does not parse", args: []string{"--leader-election-lease-duration=soon"}, code: 2, output: "leader-election-lease-duration"},
		{name: "a duration without its unit", args: []string{"--recompute-interval=10"}, code: 2, output: "recompute-interval"},
		{name: "a certificate without its key", args: []string{"--tls-cert-file=/tls.crt"}, code: 2, output: "--tls-private-key-file"},
		{name: "a quantity that is none", args: []string{"--webhook-max-inflight-bytes=lots"}, code: 2, output: "--webhook-max-inflight-bytes"},
		{name: "spare nodes that are no number", args: []string{"--mig-spare-nodes=many"}, code: 2, output: "--mig-spare-nodes"},
		{name: "nothing to do", args: []string{"--fleet-accounting=false", "--webhook-address="}, code: 2, output: "nothing to do"},
		{name: "no cluster", args: append([]string{"--kubeconfig=/nonexistent/kubeconfig"}, quiet...), code: 1, output: "kubernetes client config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := gpudratest.RunDaemon(t, tc.env, tc.args...)
			out := d.Stderr
			if tc.code == 0 {
				out = d.Stdout
			}
			if d.Code != tc.code || !strings.Contains(out, tc.output) {
				t.Errorf("%v: exit %d, want %d with %q; stdout:\n%s\nstderr:\n%s", tc.args, d.Code, tc.code, tc.output, d.Stdout, d.Stderr)
			}
		})
	}
}
