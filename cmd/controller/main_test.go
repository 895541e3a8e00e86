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
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

// TestFlagsDocumented: docs/flags/gpudra-controller.md is generated from the
// binary's flags, with the environment variable that sets each one (make
// golden rewrites it).
func TestFlagsDocumented(t *testing.T) {
	_, cmd := newFlags()
	// The one default that is this machine's: --identity's host name.
	cmd.Flags.Lookup("identity").DefValue = "<host name>"
	gpudratest.GoldenFile(t, filepath.Join("..", "..", "docs", "flags", "gpudra-controller.md"), gpudratest.FlagPage(
		"`gpudra-controller` flags", "go test ./cmd/controller -run TestFlagsDocumented",
		"The flags of gpudra-controller, which the chart runs twice: as the fleet\n"+
			"accounting (leader election, fleet metrics, MIG spares, NVLink channel pools)\n"+
			"and, with `--fleet-accounting=false`, as the admission webhook alone. A flag\n"+
			"with a variable in the environment column can also be set through it.\n"+
			"Conventions common to the binaries: [flags.md](../flags.md).",
		gpudratest.FlagSection{Flags: cmd.Flags, EnvOf: cmd.EnvOf}))
}

// TestWebhookConfigurations: --webhook-configuration is a list, blanks
// and empty items dropped, as the plugin's lists are.
func TestWebhookConfigurations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "gpudra-controller"},
		{[]string{"--webhook-configuration=a"}, "a"},
		{[]string{"--webhook-configuration=a, b,"}, "a|b"},
		{[]string{"--webhook-configuration=a", "--webhook-configuration", "b"}, "a|b"},
	} {
		f, cmd := newFlags()
		cmd.LookupEnv = func(string) (string, bool) { return "", false }
		if err := cmd.Flags.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(f.webhookConfigs, "|"); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}
