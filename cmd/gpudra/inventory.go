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
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/inventory"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/textsafe"
)

// inventoryOptions are gpudra inventory's flags.
type inventoryOptions struct {
	nodeName, driverName, driverRoot string
	backend, fakeProfile             string
	migProfiles, migSpareGPUs        string
	compare                          string
	output                           string
}

func newInventoryCommand() *cobra.Command {
	var o inventoryOptions
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Print the ResourceSlices the kubelet plugin would publish for this node, from the real NVML",
		Long: `inventory is the first thing to run on a new GPU node: it reads the node's
GPUs through the NVIDIA driver's NVML library, read-only (it creates and
changes nothing, and needs no cluster), and prints the ResourceSlices the
kubelet plugin would publish for them, with the plugin's own discovery and
slice builder: whole objects (a List with --output json), which gpudra check
reads as the node's inventory (gpudra check node.yaml manifests/).

With --compare it also lists how they differ from the fake profile that
gpudra check, gpudra simulate and the e2e suite stand the node in for:
devices, attributes, capacities and counters (UUIDs and PCI addresses,
which differ between any two nodes, are left out).

On a node of a cluster, run it from gpudra's image without installing
anything (the sysadmin profile gives the debug pod the GPUs' device nodes;
the node's root is at /host):

  kubectl debug node/<node> -it --profile=sysadmin --image=ghcr.io/gpudra/gpudra:<version> \
    -- gpudra inventory --driver-root /host --compare dgx-h100

-o json prints the slices as one List object, -o yaml (the default) as YAML
documents, -o none only the comparison. A comment line says where the node
stands in a multi-node NVLink fabric (GB200/GB300 NVL72): its NVLink
domain, why its GPUs are in none, or that it has no such fabric (on
stderr with -o json).

Exit status: 0 (no differences), 1 differences from --compare's profile, 2 a
bad command line, 3 the GPUs could not be read (no NVIDIA driver, NVML
failed).`,
		Example: `  gpudra inventory
  gpudra inventory --compare dgx-h100
  gpudra inventory --driver-root /run/nvidia/driver --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInventory(cmd, o)
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.nodeName, "node-name", envOr("NODE_NAME", host), "the node's name: the pool name (env NODE_NAME, default the host name)")
	f.StringVar(&o.driverName, "driver-name", gpu.DefaultDriverName, "DRA driver name")
	f.StringVar(&o.driverRoot, "driver-root", "/", "where the NVIDIA driver is installed (/run/nvidia/driver with the GPU Operator)")
	f.StringVar(&o.backend, "device-backend", "nvml", "nvml (the real driver) or fake (a fake profile, e.g. to see what it publishes)")
	f.StringVar(&o.fakeProfile, "fake-profile", fakenodes.DefaultProfile, "with --device-backend=fake: "+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file")
	f.StringVar(&o.migProfiles, "mig-profiles", "all", "the MIG profiles the plugin publishes (its --mig-profiles)")
	f.StringVar(&o.migSpareGPUs, "mig-spare-gpus", strconv.Itoa(slicebuilder.DefaultSpareGPUs), "the free GPUs that publish their MIG placements; the node is shown as the plugin publishes it with nothing prepared, "+spareGPUsUsage)
	f.StringVar(&o.compare, "compare", "", "a fake profile ("+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file) to list the differences from")
	outputFlag(cmd, &o.output, "yaml", "yaml", "json", "none")
	return cmd
}

func runInventory(cmd *cobra.Command, o inventoryOptions) error {
	ctx := klog.NewContext(cmd.Context(), klog.Background().V(10))
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	choice, err := slicebuilder.ParseMigProfiles(o.migProfiles)
	if err != nil {
		return usageErrorf("--mig-profiles: %w", err)
	}
	if !slices.Contains(backend.Kinds, o.backend) {
		return usageErrorf("--device-backend %q: want %s", o.backend, strings.Join(backend.Kinds, " or "))
	}
	spare, err := parseOfflineSpares(o.migSpareGPUs)
	if err != nil {
		return usageErrorf("--mig-spare-gpus: %w", err)
	}
	dir, err := os.MkdirTemp("", "gpudra-inventory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	published, domain, err := inventorySlices(ctx, backend.Options{
		Kind: o.backend, NodeName: o.nodeName, DriverRoot: o.driverRoot,
		FakeProfile: o.fakeProfile, FakeStateDir: dir, InventoryOnly: true, ReadOnly: true,
	}, o.driverName, choice, spare)
	if err != nil {
		if o.backend == "fake" { // a bad --fake-profile
			return usageErrorf("%w", err)
		}
		return err
	}
	if err := writeInventory(cmd, o, published, domain); err != nil {
		return err
	}
	return compareInventory(ctx, cmd, o, dir, published, choice, spare)
}

// writeInventory prints the slices as -o says, with where the node stands
// in a multi-node NVLink fabric.
func writeInventory(cmd *cobra.Command, o inventoryOptions, published []*resourceapi.ResourceSlice, domain gpu.NVLinkDomain) error {
	// Whole objects, as kubectl get prints them: gpudra check reads them
	// as the node's inventory.
	for _, s := range published {
		s.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"}
	}
	out := cmd.OutOrStdout()
	// Where the node stands in a multi-node NVLink fabric: a comment
	// beside YAML, on stderr beside JSON, which must stay one object.
	nvlink := out
	if o.output == "json" {
		nvlink = cmd.ErrOrStderr()
	}
	switch o.output {
	case "yaml":
		fmt.Fprintf(out, "# The ResourceSlices gpudra's kubelet plugin publishes for node %s: check manifests against them with gpudra check <this file> <manifests>\n", o.nodeName)
		fmt.Fprintf(nvlink, "# %s\n", textsafe.Line(domain.Describe()))
		for _, s := range published {
			b, err := yaml.Marshal(s)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "---\n%s", b)
		}
	case "json":
		list := struct {
			metav1.TypeMeta `json:",inline"`
			Items           []*resourceapi.ResourceSlice `json:"items"`
		}{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: published}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
		fmt.Fprintf(nvlink, "# %s\n", textsafe.Line(domain.Describe()))
	case "none":
		fmt.Fprintf(nvlink, "# %s\n", textsafe.Line(domain.Describe()))
	}
	return nil
}

// compareInventory compares the slices with those of the --compare fake
// profile, lists the differences, and fails (exitNegative) when there are
// any; without --compare it does nothing.
func compareInventory(ctx context.Context, cmd *cobra.Command, o inventoryOptions, dir string, published []*resourceapi.ResourceSlice, choice slicebuilder.MigProfiles, spare slicebuilder.SpareGPUs) error {
	if o.compare == "" {
		return nil
	}
	want, _, err := inventorySlices(ctx, backend.Options{
		Kind: "fake", NodeName: o.nodeName, FakeProfile: o.compare, FakeStateDir: dir + "/compare", InventoryOnly: true,
	}, o.driverName, choice, spare)
	if err != nil {
		return usageErrorf("--compare: %w", err)
	}
	diffs := inventory.Diff(published, want)
	w := cmd.ErrOrStderr()
	if o.output == "none" {
		w = cmd.OutOrStdout()
	}
	if len(diffs) == 0 {
		fmt.Fprintf(w, "# no differences from fake profile %s\n", o.compare)
		return nil
	}
	fmt.Fprintf(w, "# %d differences from fake profile %s:\n", len(diffs), o.compare)
	for _, d := range diffs {
		// Names and values the node published: one line each.
		fmt.Fprintf(w, "#   %s\n", textsafe.Line(d))
	}
	return exitError{code: exitNegative}
}

// inventorySlices opens the backend read-only, discovers the GPUs and
// builds the node's slices as the plugin does; it also says where the node
// stands in a multi-node NVLink fabric.
func inventorySlices(ctx context.Context, opts backend.Options, driverName string, choice slicebuilder.MigProfiles, spare slicebuilder.SpareGPUs) ([]*resourceapi.ResourceSlice, gpu.NVLinkDomain, error) {
	be, err := backend.Open(ctx, opts)
	if err != nil {
		if opts.Kind == "nvml" {
			return nil, gpu.NVLinkDomain{}, fmt.Errorf("%w (is the NVIDIA driver installed? With the GPU Operator's driver container, pass --driver-root /run/nvidia/driver)", err)
		}
		return nil, gpu.NVLinkDomain{}, err
	}
	defer be.Close()
	node, err := be.Discover(ctx)
	if err != nil {
		return nil, gpu.NVLinkDomain{}, err
	}
	node.Name = opts.NodeName
	res, err := slicebuilder.Build(node, slicebuilder.Options{DriverName: driverName, SysfsRoot: be.SysfsRoot(), MigProfiles: choice, SpareGPUs: spare})
	if err != nil {
		return nil, gpu.NVLinkDomain{}, err
	}
	return fakenodes.PoolSlices(driverName, opts.NodeName, res), node.NVLinkDomain(), nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
