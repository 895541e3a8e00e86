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
	gpudratest.CheckExitStatus(t, []gpudratest.ExitCase{
		{Name: "version", Args: []string{"--version"}, Code: 0, Output: "gpudra-controller "},
		{Name: "unknown flag", Args: []string{"--no-such-flag"}, Code: 2, Output: "unknown flag: --no-such-flag"},
		{Name: "a value that does not parse", Args: []string{"--leader-election-lease-duration=soon"}, Code: 2, Output: "leader-election-lease-duration"},
		{Name: "a duration without its unit", Args: []string{"--recompute-interval=10"}, Code: 2, Output: "recompute-interval"},
		{Name: "a certificate without its key", Args: []string{"--tls-cert-file=/tls.crt"}, Code: 2, Output: "--tls-private-key-file"},
		{Name: "a quantity that is none", Args: []string{"--webhook-max-inflight-bytes=lots"}, Code: 2, Output: "--webhook-max-inflight-bytes"},
		{Name: "spare nodes that are no number", Args: []string{"--mig-spare-nodes=many"}, Code: 2, Output: "--mig-spare-nodes"},
		{Name: "nothing to do", Args: []string{"--fleet-accounting=false", "--webhook-address="}, Code: 2, Output: "nothing to do"},
		{Name: "no cluster", Args: append([]string{"--kubeconfig=/nonexistent/kubeconfig"}, quiet...), Code: 1, Output: "kubernetes client config"},
	})
}
