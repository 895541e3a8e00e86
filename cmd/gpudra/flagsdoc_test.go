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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

// TestFlagsDocumented: docs/flags/gpudra.md is generated from the
// commands' own flags, one table per subcommand (make golden rewrites
// it), so the page cannot lag behind a flag that is added or changed.
// It documents the Linux build (cgo): the laptop build lacks the NVML
// subcommands, and cli.md says which.
func TestFlagsDocumented(t *testing.T) {
	t.Setenv("NODE_NAME", "") // inventory's --node-name defaults to it
	root := newRootCommand("gpudra")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var sections []gpudratest.FlagSection
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			if sub.Runnable() {
				// InheritedFlags merges the parents' persistent
				// flags into Flags: the table lists every flag the
				// subcommand takes.
				sub.InheritedFlags()
				// The one default that is this machine's: --node-name's
				// host name (inventory, gpu-check).
				if f := sub.Flags().Lookup("node-name"); f != nil && f.DefValue == host {
					f.DefValue = "<host name>"
				}
				sections = append(sections, gpudratest.FlagSection{
					Heading: "`" + sub.CommandPath() + "`",
					Text:    strings.TrimSuffix(sub.Short, ".") + ". Usage: `" + sub.UseLine() + "`.",
					Flags:   sub.Flags(),
				})
			}
			walk(sub)
		}
	}
	walk(root)
	if len(sections) < 5 {
		t.Fatalf("found only %d subcommands", len(sections))
	}
	gpudratest.GoldenFile(t, filepath.Join("..", "..", "docs", "flags", "gpudra.md"), gpudratest.FlagPage(
		"`gpudra` flags", "go test ./cmd/gpudra -run TestFlagsDocumented",
		"The flags of each subcommand of `gpudra` (`kubectl gpudra` when installed as\n"+
			"`kubectl-gpudra`). What each subcommand does, its output and its exit\n"+
			"codes: [cli.md](../cli.md). `gpudra completion bash|zsh|fish|powershell`\n"+
			"(cobra's) prints shell completion; every subcommand takes `-h`, `--help`.",
		sections...))
}
