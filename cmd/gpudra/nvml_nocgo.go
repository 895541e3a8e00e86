//go:build !cgo

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
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// The build without cgo, for laptops (macOS, Windows, Linux without a C
// toolchain): go-nvml needs cgo, so this gpudra has no NVML, real or fake.
// inventory, gpu-check and simulate are left out, and say so when asked
// for; check has no fake GPU profiles and checks against ResourceSlices
// given to it (a file, or --cluster).

// buildNote is what the root help says of this build.
const buildNote = "\n\nThis build has no cgo (the build for laptops): inventory, gpu-check and\nsimulate are not in it, and check has no fake GPU profiles."

// nvmlCommands are hidden stand-ins for inventory, gpu-check and simulate
// that exit 3 with errNoNVML.
func nvmlCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, name := range []string{"simulate", "inventory", "gpu-check"} {
		out = append(out, &cobra.Command{
			Use:                name,
			Short:              "Not in this build (no cgo, no NVML)",
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return fmt.Errorf("%s: %w", cmd.CommandPath(), errNoNVML)
			},
		})
	}
	return out
}

// fakeProfiles are none.
func fakeProfiles() []string { return nil }

// fakeInventory fails: there are no fake GPUs.
func fakeInventory(context.Context, *check.Options, string, int, string, fakePool, scheduler.Features, func(int)) (func(), error) {
	return nil, fmt.Errorf("no fake GPU profiles: %w; or give the ResourceSlices to check against as an input file (kubectl get resourceslices -o yaml), or --cluster", errNoNVML)
}
