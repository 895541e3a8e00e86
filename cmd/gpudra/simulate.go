package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/gpudra/gpudra/pkg/gpu"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
	"github.com/gpudra/gpudra/pkg/simulate"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

func newSimulateCommand() *cobra.Command {
	var opts simulate.Options
	var manifests, migProfiles string
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run the kubelet plugin in-process on fake GPUs and show what example pods receive",
		Long: `simulate starts gpudra's real kubelet plugin on a fake node (fake GPUs behind
the NVML interface), publishes its ResourceSlices to an in-memory API server,
allocates each example's claims with the real Kubernetes scheduler allocator,
prepares them over the plugin's gRPC socket like the kubelet, and prints, for
each example pod, which devices it got and what each container receives
(environment, device nodes, mounts) from the CDI specs the plugin wrote.

Without --manifests it uses the DeviceClasses and examples built into this
binary (deviceclasses/ and deviceclasses/examples/ in the source tree).`,
		Example: `  gpudra simulate
  gpudra simulate --profile dgx-a100
  gpudra simulate --profile mixed --manifests ./deviceclasses`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fsys fs.FS = deviceclasses.FS
			if manifests != "" {
				fsys = os.DirFS(manifests)
			}
			dir, err := os.MkdirTemp("", "gpudra-simulate-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			opts.Dir = dir
			if opts.MigProfiles, err = slicebuilder.ParseMigProfiles(migProfiles); err != nil {
				return fmt.Errorf("--mig-profiles: %w", err)
			}
			// The plugin logs through klog; keep the demo output readable.
			ctx := klog.NewContext(cmd.Context(), klog.Background().V(10))
			return runSimulate(ctx, cmd, opts, fsys)
		},
	}
	cmd.Flags().StringVar(&opts.Profile, "profile", "dgx-h100", "fake GPU profile: "+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file (see docs/fake-gpus.md)")
	cmd.Flags().StringVar(&opts.NodeName, "node-name", "node-1", "name of the simulated node (seeds the fake GPUs' UUIDs)")
	cmd.Flags().StringVar(&opts.DriverName, "driver-name", gpu.DefaultDriverName, "DRA driver name")
	cmd.Flags().StringVar(&migProfiles, "mig-profiles", "all", "MIG profiles the plugin publishes, as its --mig-profiles: all, none, or e.g. 1g.10gb,3g.40gb,7g.80gb")
	cmd.Flags().BoolVar(&opts.ConsumableCapacity, "consumable-capacity", true, "publish shareable whole GPUs (consumable capacity), as a node pool with the chart's consumableCapacity.enabled does")
	cmd.Flags().StringVar(&opts.ShareSharing, "consumable-capacity-sharing", "None", "how shares of a GPU are shared when their config does not say: MPS, TimeSlicing or None")
	cmd.Flags().StringVar(&manifests, "manifests", "", "directory with DeviceClasses (*.yaml) and examples (examples/*.yaml); default: the built-in ones")
	return cmd
}

func runSimulate(ctx context.Context, cmd *cobra.Command, opts simulate.Options, fsys fs.FS) error {
	out := cmd.OutOrStdout()
	classes, err := simulate.LoadDeviceClasses(fsys)
	if err != nil {
		return err
	}
	examples, err := simulate.LoadExamples(fsys)
	if err != nil {
		return err
	}
	cluster, err := simulate.Start(ctx, opts, nil)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	for _, dc := range classes {
		if err := cluster.ApplyDeviceClass(ctx, dc); err != nil {
			return err
		}
	}
	slices, err := cluster.Slices(ctx)
	if err != nil {
		return err
	}
	node := cluster.Driver.Node()
	fmt.Fprintf(out, "node %s: %d GPUs (%s), %d ResourceSlice(s) published by %s; consumable capacity %v (shares: %s)\n",
		node.Name, len(node.GPUs), cluster.Opts.Profile, len(slices), cluster.Opts.DriverName, cluster.Driver.ConsumableCapacityActive(), cluster.Opts.ShareSharing)
	for _, g := range node.GPUs {
		fmt.Fprintf(out, "  %s  %s  %s  %d MiB  nvlinkGroup=%d  pci=%s\n", g.DeviceName(), g.UUID, g.ProductName, g.MemoryBytes>>20, g.NVLinkGroup, g.PCIBusID)
	}
	failed := 0
	for _, ex := range examples {
		fmt.Fprintf(out, "\n== %s\n", ex.File)
		results, err := cluster.RunExample(ctx, ex)
		for _, res := range results {
			if res != nil && len(res.Containers) > 0 {
				simulate.PrintPod(out, res)
			}
		}
		if err != nil {
			failed++
			fmt.Fprintf(out, "  NOT RUNNABLE: %v\n", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d examples could not run on profile %s", failed, len(examples), cluster.Opts.Profile)
	}
	return nil
}
