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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/simulate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/textsafe"
)

func newSimulateCommand() *cobra.Command {
	var opts simulate.Options
	var manifests, migProfiles, migSpareGPUs, output string
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
binary (deviceclasses/ and deviceclasses/examples/ in the source tree). With
--manifests - it reads one YAML stream from standard input: its
DeviceClasses (the built-in ones when it has none) and one example of its
claims, templates and pods.

-o json and -o yaml print the node and every example's pods as one object.

Exit status: 0 every example ran, 1 some example could not run, 2 a bad
command line or unusable manifests, 3 the in-process plugin failed.`,
		Example: `  gpudra simulate
  gpudra simulate --profile dgx-a100
  gpudra simulate --profile mixed --manifests ./deviceclasses
  gpudra simulate --manifests - -o yaml < my-pod.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			var err error
			if opts.MigProfiles, err = slicebuilder.ParseMigProfiles(migProfiles); err != nil {
				return usageErrorf("--mig-profiles: %w", err)
			}
			if opts.SpareGPUs, err = parseOfflineSpares(migSpareGPUs); err != nil {
				return usageErrorf("--mig-spare-gpus: %w", err)
			}
			fsys, err := manifestsFS(manifests, cmd.InOrStdin())
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "gpudra-simulate-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			opts.Dir = dir
			// The plugin logs through klog; keep the demo output readable.
			ctx := klog.NewContext(cmd.Context(), klog.Background().V(10))
			return runSimulate(ctx, cmd, opts, fsys, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Profile, "profile", "dgx-h100", "fake GPU profile: "+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file (see docs/fake-gpus.md)")
	f.StringVar(&opts.NodeName, "node-name", "node-1", "name of the simulated node (seeds the fake GPUs' UUIDs)")
	f.StringVar(&opts.DriverName, "driver-name", gpu.DefaultDriverName, "DRA driver name")
	f.StringVar(&migProfiles, "mig-profiles", "all", "MIG profiles the plugin publishes, as its --mig-profiles: all, none, or e.g. 1g.10gb,3g.40gb,7g.80gb")
	f.StringVar(&migSpareGPUs, "mig-spare-gpus", strconv.Itoa(slicebuilder.DefaultSpareGPUs), "free GPUs that publish their MIG placements, "+spareGPUsUsage)
	f.BoolVar(&opts.ConsumableCapacity, "consumable-capacity", true, "publish shareable whole GPUs (consumable capacity), as a node pool with the chart's consumableCapacity.enabled does")
	f.StringVar(&opts.ShareSharing, "consumable-capacity-sharing", "None", "how shares of a GPU are shared when their config does not say: MPS, TimeSlicing or None")
	f.StringVar(&manifests, "manifests", "", "directory with DeviceClasses (*.yaml) and examples (examples/*.yaml), or - for one YAML stream on standard input; default: the built-in ones")
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// manifestsFS is what --manifests names: the built-in DeviceClasses and
// examples, a directory, or standard input as one example.
func manifestsFS(manifests string, stdin io.Reader) (fs.FS, error) {
	switch manifests {
	case "":
		return deviceclasses.FS, nil
	case "-":
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, usageErrorf("standard input: %w", err)
		}
		return stdinFS(data)
	}
	if st, err := os.Stat(manifests); err != nil || !st.IsDir() {
		return nil, usageErrorf("--manifests %s: want a directory with DeviceClasses and examples/, or -", manifests)
	}
	return os.DirFS(manifests), nil
}

// stdinFS lays a YAML stream out as simulate reads a directory: its
// DeviceClasses at the top (or the built-in ones), the rest as
// examples/stdin.yaml.
func stdinFS(data []byte) (fs.FS, error) {
	var classes, rest []string
	for _, doc := range scheduler.SplitDocuments(data) {
		if scheduler.OnlyComments(doc.Text) {
			continue
		}
		var tm struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc.Text, &tm); err != nil {
			return nil, usageErrorf("standard input, line %d: malformed YAML: %v", doc.Line, err)
		}
		if tm.Kind == "DeviceClass" {
			classes = append(classes, string(doc.Text))
		} else {
			rest = append(rest, string(doc.Text))
		}
	}
	if len(rest) == 0 {
		return nil, usageErrorf("standard input holds no claims, templates or pods to simulate")
	}
	out := fstest.MapFS{"examples/stdin.yaml": {Data: []byte(strings.Join(rest, "\n---\n"))}}
	if len(classes) > 0 {
		out["stdin-classes.yaml"] = &fstest.MapFile{Data: []byte(strings.Join(classes, "\n---\n"))}
		return out, nil
	}
	builtin, err := fs.Glob(deviceclasses.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	for _, f := range builtin {
		b, err := fs.ReadFile(deviceclasses.FS, f)
		if err != nil {
			return nil, err
		}
		out[f] = &fstest.MapFile{Data: b}
	}
	return out, nil
}

// simulation is what -o json|yaml prints.
type simulation struct {
	Node               string             `json:"node"`
	Profile            string             `json:"profile"`
	Driver             string             `json:"driver"`
	ConsumableCapacity bool               `json:"consumableCapacity"`
	ResourceSlices     int                `json:"resourceSlices"`
	GPUs               []simulatedGPU     `json:"gpus"`
	Examples           []simulatedExample `json:"examples"`
	Failed             int                `json:"failed"`
}

type simulatedGPU struct {
	Device      string `json:"device"`
	UUID        string `json:"uuid"`
	ProductName string `json:"productName"`
	MemoryMiB   uint64 `json:"memoryMiB"`
	NVLinkGroup int    `json:"nvlinkGroup"`
	PCIBusID    string `json:"pciBusID"`
}

type simulatedExample struct {
	File  string         `json:"file"`
	Pods  []simulatedPod `json:"pods"`
	Error string         `json:"error,omitempty"`
}

type simulatedPod struct {
	Pod        string               `json:"pod"`
	Claims     []simulatedClaim     `json:"claims"`
	Containers []simulatedContainer `json:"containers"`
}

// simulatedContainer is what one container receives (simulate.Container).
type simulatedContainer struct {
	Name        string   `json:"name"`
	CDIDevices  []string `json:"cdiDevices"`
	Env         []string `json:"env"`
	DeviceNodes []string `json:"deviceNodes"`
	Mounts      []string `json:"mounts"`
	Hooks       []string `json:"hooks"`
}

type simulatedClaim struct {
	Name    string   `json:"name,omitempty"`
	Claim   string   `json:"claim"`
	Devices []string `json:"devices"`
}

func runSimulate(ctx context.Context, cmd *cobra.Command, opts simulate.Options, fsys fs.FS, output string) error {
	out := cmd.OutOrStdout()
	classes, err := simulate.LoadDeviceClasses(fsys)
	if err != nil {
		return usageErrorf("%w", err)
	}
	examples, err := simulate.LoadExamples(fsys)
	if err != nil {
		return usageErrorf("%w", err)
	}
	cluster, err := simulate.Start(ctx, opts, nil)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "unknown profile") {
			return usageErrorf("--profile %s: %w", opts.Profile, err)
		}
		return err
	}
	defer cluster.Stop()
	for _, dc := range classes {
		if err := cluster.ApplyDeviceClass(ctx, dc); err != nil {
			return usageErrorf("%w", err)
		}
	}
	slices, err := cluster.Slices(ctx)
	if err != nil {
		return err
	}
	node := cluster.Driver.Node()
	sim := simulation{Node: node.Name, Profile: cluster.Opts.Profile, Driver: cluster.Opts.DriverName,
		ConsumableCapacity: cluster.Driver.ConsumableCapacityActive(), ResourceSlices: len(slices)}
	text := output == "text"
	if text {
		fmt.Fprintf(out, "node %s: %d GPUs (%s), %d ResourceSlice(s) published by %s; consumable capacity %v (shares: %s)\n",
			node.Name, len(node.GPUs), cluster.Opts.Profile, len(slices), cluster.Opts.DriverName, cluster.Driver.ConsumableCapacityActive(), cluster.Opts.ShareSharing)
	}
	for _, g := range node.GPUs {
		sim.GPUs = append(sim.GPUs, simulatedGPU{Device: g.DeviceName(), UUID: g.UUID, ProductName: g.ProductName, MemoryMiB: g.MemoryBytes >> 20, NVLinkGroup: g.NVLinkGroup, PCIBusID: g.PCIBusID})
		if text {
			fmt.Fprintf(out, "  %s  %s  %s  %d MiB  nvlinkGroup=%d  pci=%s\n", g.DeviceName(), g.UUID, g.ProductName, g.MemoryBytes>>20, g.NVLinkGroup, g.PCIBusID)
		}
	}
	for _, ex := range examples {
		if text {
			fmt.Fprintf(out, "\n== %s\n", ex.File)
		}
		se := simulatedExample{File: ex.File}
		results, err := cluster.RunExample(ctx, ex)
		for _, res := range results {
			if res == nil || len(res.Containers) == 0 {
				continue
			}
			if text {
				simulate.PrintPod(out, res)
			}
			se.Pods = append(se.Pods, podOf(res))
		}
		if err != nil {
			sim.Failed++
			se.Error = err.Error()
			if text {
				fmt.Fprintf(out, "  NOT RUNNABLE: %s\n", textsafe.Text(err.Error()))
			}
		}
		sim.Examples = append(sim.Examples, se)
	}
	if !text {
		if err := writeObject(out, output, sim); err != nil {
			return err
		}
	}
	if sim.Failed > 0 {
		if text {
			fmt.Fprintf(cmd.ErrOrStderr(), "gpudra simulate: %d of %d examples could not run on profile %s\n", sim.Failed, len(examples), cluster.Opts.Profile)
		}
		return exitError{code: exitNegative}
	}
	return nil
}

func podOf(res *simulate.PodResult) simulatedPod {
	p := simulatedPod{Pod: res.Pod}
	for _, c := range res.Containers {
		p.Containers = append(p.Containers, simulatedContainer(c))
	}
	for _, pc := range res.Claims {
		c := simulatedClaim{Name: pc.Name}
		if pc.Claim != nil {
			c.Claim = pc.Claim.Namespace + "/" + pc.Claim.Name
		}
		for _, d := range pc.Devices {
			c.Devices = append(c.Devices, d.DeviceName)
		}
		p.Claims = append(p.Claims, c)
	}
	return p
}
