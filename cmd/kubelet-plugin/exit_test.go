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

// TestHelp: --help describes the plugin and groups its flags.
func TestHelp(t *testing.T) {
	_, cmd := newFlags()
	gpudratest.CheckHelp(t, cmd, "Node", "Devices", "CDI", "MIG", "Sharing", "Health and metrics", "Multi-node NVLink")
}

// TestExitStatus: the exit statuses --help and the README promise, from
// the binary's own main: 0 for --version and --help, 2 for a bad command
// line or environment, 1 for a failure at run time.
func TestExitStatus(t *testing.T) {
	// Nothing here may reach a cluster, a GPU or keep a port: the run-time
	// failure is a kubeconfig that does not exist, met before any device
	// backend opens.
	node := []string{"--node-name=node-1", "--metrics-address=", "--healthcheck-port=0"}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		output string // in stdout for 0, in stderr otherwise
	}{
		{name: "version", args: []string{"--version"}, code: 0, output: "gpudra-kubelet-plugin "},
		{name: "unknown flag", args: []string{"--no-such-flag"}, code: 2, output: "unknown flag: --no-such-flag"},
		{name: "a value that does not parse", args: []string{"--healthcheck-port=port"}, code: 2, output: "healthcheck-port"},
		{name: "an environment variable that does not parse", env: []string{"DEVICE_METADATA=yes"}, args: node, code: 2, output: "DEVICE_METADATA"},
		{name: "no node name", env: []string{"NODE_NAME="}, code: 2, output: "--node-name"},
		{name: "a MIG profile that is none", args: append([]string{"--mig-profiles=big"}, node...), code: 2, output: "--mig-profiles"},
		{name: "a port out of range", args: []string{"--node-name=node-1", "--metrics-address=", "--healthcheck-port=70000"}, code: 2, output: "--healthcheck-port"},
		{name: "an unknown sharing", args: append([]string{"--consumable-capacity-sharing=Sometimes"}, node...), code: 2, output: "--consumable-capacity-sharing"},
		{name: "no cluster", args: append([]string{"--kubeconfig=/nonexistent/kubeconfig"}, node...), code: 1, output: "kubernetes client config"},
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
