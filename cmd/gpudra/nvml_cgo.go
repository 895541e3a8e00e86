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
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// The subcommands and inventories that need NVML, real or fake (go-nvml,
// which needs cgo): the Linux build has them; the build without cgo, for
// laptops (nvml_nocgo.go), does not.

// buildNote is what the root help says of this build.
const buildNote = ""

// nvmlCommands are inventory, gpu-check and simulate.
func nvmlCommands() []*cobra.Command {
	return []*cobra.Command{newSimulateCommand(), newInventoryCommand(), newGPUCheckCommand()}
}

// fakeProfiles are the built-in fake GPU profiles.
func fakeProfiles() []string { return nvmlfake.Profiles() }

// fakeInventory points opts at what gpudra publishes on nodes fake nodes
// of profile, with the pool's settings on a cluster with feats, built by
// the plugin's own slice builder, telling progress how many are built;
// close removes the fake nodes' state.
func fakeInventory(ctx context.Context, opts *check.Options, profile string, nodes int, driver string, pool fakePool, feats scheduler.Features, progress func(built int)) (close func(), err error) {
	fp, notes := fakenodes.Pool{ConsumableCapacity: pool.consumableCapacity, MigProfiles: pool.migProfiles, SpareGPUs: pool.spareGPUs, SpareNodes: pool.spareNodes}.On(feats)
	opts.Slices, err = fakenodes.SlicesWithProgress(ctx, profile, nodes, driver, fp, progress)
	if err != nil {
		return nil, fmt.Errorf("--profile %s: %w", profile, err)
	}
	// In sequential mode the fake nodes republish after each claim, as
	// the plugin does once it prepared it.
	rp, err := fakenodes.NewRepublisher(profile, driver, fp)
	if err != nil {
		return nil, err
	}
	opts.Republish, opts.Spare = rp.Slices, rp.SparedSlices
	opts.SpareGPUs, opts.SpareNodes = pool.spareGPUs.String(), pool.spareNodes
	opts.SlicesSource = fmt.Sprintf("profile %s × %d node(s) through gpudra's slice builder, driver %s", profile, nodes, driver)
	opts.SlicesNotes = notes
	return func() { _ = rp.Close() }, nil
}
