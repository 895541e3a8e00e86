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
	gpudratest.CheckExitStatus(t, []gpudratest.ExitCase{
		{Name: "version", Args: []string{"--version"}, Code: 0, Output: "gpudra-kubelet-plugin "},
		{Name: "unknown flag", Args: []string{"--no-such-flag"}, Code: 2, Output: "unknown flag: --no-such-flag"},
		{Name: "a value that does not parse", Args: []string{"--healthcheck-port=port"}, Code: 2, Output: "healthcheck-port"},
		{Name: "an environment variable that does not parse", Env: []string{"DEVICE_METADATA=yes"}, Args: node, Code: 2, Output: "DEVICE_METADATA"},
		{Name: "no node name", Env: []string{"NODE_NAME="}, Code: 2, Output: "--node-name"},
		{Name: "a MIG profile that is none", Args: append([]string{"--mig-profiles=big"}, node...), Code: 2, Output: "--mig-profiles"},
		{Name: "a port out of range", Args: []string{"--node-name=node-1", "--metrics-address=", "--healthcheck-port=70000"}, Code: 2, Output: "--healthcheck-port"},
		{Name: "an unknown sharing", Args: append([]string{"--consumable-capacity-sharing=Sometimes"}, node...), Code: 2, Output: "--consumable-capacity-sharing"},
		{Name: "no cluster", Args: append([]string{"--kubeconfig=/nonexistent/kubeconfig"}, node...), Code: 1, Output: "kubernetes client config"},
	})
}
