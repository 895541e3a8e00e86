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
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpucheck"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

func newGPUCheckCommand() *cobra.Command {
	var o gpucheck.Options
	var report, output string
	cmd := &cobra.Command{
		Use:   "gpu-check",
		Short: "Check, read-only, that gpudra sees this machine's GPUs as the fake GPUs model them, and write a report",
		Long: `gpu-check runs, on a machine with NVIDIA GPUs and no cluster, every part of
gpudra that touches the GPUs and the driver, read-only, and writes down what
it found (make gpu-check runs it with the binaries built and a 5-minute
limit):

  - NVML opened through gpudra's read-only wrapper: a call that would change
    MIG mode, compute mode, clocks, power limits or any other setting is
    refused, and the check fails if one was tried;
  - discovery, as the kubelet plugin does it;
  - the ResourceSlices the plugin would publish compared with the fake
    profile of the same GPUs (gpudra inventory --compare; --compare picks
    another);
  - a CDI spec for every GPU (and every MIG device an admin made), from the
    driver files NVIDIA's toolkit finds below --driver-root, written into a
    temporary directory, and every path it names checked;
  - the health watch for --health seconds;
  - the MIG profiles and placements NVML reports.

--report writes the whole report as Markdown (commit it with the fake
profile corrections it calls for); -o json and -o yaml print it as one
object, -o text one line per step.

Exit status: 0 every step passed, 1 a step failed (differences from the fake
profile, a missing path, a refused call), 2 a bad command line, 3 NVML could
not be opened (no NVIDIA GPU or driver here).`,
		Example: `  make gpu-check
  gpudra gpu-check --report gpu-check.md
  gpudra gpu-check --driver-root /run/nvidia/driver --compare dgx-h100 -o yaml
  gpudra gpu-check --device-backend fake --fake-profile mixed   # the check itself, on fake GPUs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGPUCheck(cmd, o, report, output)
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.Backend.Kind, "device-backend", "nvml", "nvml (the real driver) or fake (fake GPUs: the check itself, tested without a GPU)")
	f.StringVar(&o.Backend.DriverRoot, "driver-root", "/", "where the NVIDIA driver is installed (/run/nvidia/driver with the GPU Operator)")
	f.StringVar(&o.Backend.CDIHookPath, "nvidia-cdi-hook-path", backend.DefaultCDIHookPath, "NVIDIA's nvidia-cdi-hook, as the CDI specs name it (make gpu-check builds one)")
	f.StringVar(&o.Backend.FakeProfile, "fake-profile", "dgx-h100", "with --device-backend=fake: "+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file")
	f.StringVar(&o.Backend.FakeStateDir, "fake-state-dir", "", "with --device-backend=fake: the fake GPUs' state (default: a temporary directory)")
	f.StringVar(&o.Backend.NodeName, "node-name", host, "the node's name: the pool name of the slices")
	f.StringVar(&o.DriverName, "driver-name", gpu.DefaultDriverName, "DRA driver name")
	f.StringVar(&o.Compare, "compare", "", "fake profile to compare with (default: the built-in profile with the same GPUs)")
	f.DurationVar(&o.Health, "health", 5*time.Second, "how long to watch health events")
	f.StringVar(&report, "report", "", "write the report here (Markdown)")
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// runGPUCheck runs the check with the options the flags set, writes the
// report where --report and -o say, and turns the outcome into the exit
// status (gpu-check's help lists them).
func runGPUCheck(cmd *cobra.Command, o gpucheck.Options, report, output string) error {
	if err := checkOutput(cmd, output); err != nil {
		return err
	}
	if !slices.Contains(backend.Kinds, o.Backend.Kind) {
		return usageErrorf("--device-backend %q: want %s", o.Backend.Kind, strings.Join(backend.Kinds, " or "))
	}
	ctx := klog.NewContext(cmd.Context(), klog.Background().V(10))
	rep, err := gpucheck.Run(ctx, o)
	var noGPU gpucheck.ErrNoGPU
	if errors.As(err, &noGPU) && o.Backend.Kind == "fake" {
		return usageErrorf("%w", err) // a bad --fake-profile
	}
	if rep == nil {
		return err
	}
	if werr := writeGPUCheckReport(rep, report); werr != nil {
		return werr
	}
	out := cmd.OutOrStdout()
	if output == "text" {
		if werr := rep.WriteText(out); werr != nil {
			return werr
		}
		if report != "" {
			fmt.Fprintf(out, "report: %s\n", report)
		}
	} else if werr := writeObject(out, output, rep); werr != nil {
		return werr
	}
	switch {
	case err != nil:
		return exitError{code: exitFailure, err: fmt.Errorf("%w (is the NVIDIA driver installed? With the GPU Operator's driver container, pass --driver-root /run/nvidia/driver)", err)}
	case !rep.Passed:
		return exitError{code: exitNegative}
	}
	return nil
}

// writeGPUCheckReport writes the report as Markdown to path; "" writes
// none.
func writeGPUCheckReport(rep *gpucheck.Report, path string) error {
	if path == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := rep.WriteMarkdown(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
