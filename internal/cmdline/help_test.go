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

package cmdline

import (
	"strings"
	"testing"
)

// TestHelpSections: --help prints the description, the usage line and the
// flags in named sections, the binary's first in their order, then a
// misc section for flags no section named, then the feature gate, logs and
// global sections every daemon has.
func TestHelpSections(t *testing.T) {
	c, _ := newTestCommand(nil)
	c.Description = "test does one thing well."
	c.Section("network", "port")
	c.Section("identity", "name", "list")
	c.Section("network", "interval")
	if got := strings.Join(c.Unsectioned(), ","); got != "enabled,other" {
		t.Errorf("Unsectioned() = %s, want enabled,other", got)
	}
	var out strings.Builder
	c.Flags.SetOutput(&out)
	if exit, err := c.parse([]string{"--help"}); !exit || err != nil {
		t.Fatalf("--help: exit %v, error %v", exit, err)
	}
	help := out.String()
	if !strings.HasPrefix(help, "test does one thing well.\n\nUsage:\n  test [flags]\n") {
		t.Errorf("--help does not start with the description and the usage line:\n%s", help)
	}
	// Each section's heading, then its flags (sorted, as pflag prints
	// them), in this order.
	order := []string{
		"Network flags:", "--interval", "--port",
		"Identity flags:", "--list", "--name",
		"Misc flags:", "--enabled", "--other",
		"Feature gate flags:", "--feature-gates",
		"Logs flags:", "--logging-format", "-v, --v",
		"Global flags:", "-h, --help", "--version",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(help[at:], want)
		if i < 0 {
			t.Fatalf("--help has no %q after position %d (the sections out of order?):\n%s", want, at, help)
		}
		at += i + len(want)
	}
	for _, f := range []string{"--port", "--logging-format", "--version"} {
		if n := strings.Count(help, f+" "); n != 1 {
			t.Errorf("--help lists %s %d times, want once:\n%s", f, n, help)
		}
	}
}

func TestSectionOfAnUndefinedOrPlacedFlagPanics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(c *Command)
	}{
		{"undefined", func(c *Command) { c.Section("x", "nope") }},
		{"placed twice", func(c *Command) { c.Section("x", "port"); c.Section("y", "port") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestCommand(nil)
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.setup(c)
		})
	}
}
