package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/pkg/check"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
)

// exitError carries gpudra check's exit status past cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newCheckCommand() *cobra.Command {
	opts := check.Options{}
	var output string
	var verbose, builtinExamples bool
	cmd := &cobra.Command{
		Use:   "check [FILE|DIR|-]...",
		Short: "Compile, evaluate and allocate DRA selectors offline: DeviceClasses, claims, templates, pods",
		Long: `check tells you, before you apply anything and without a cluster, whether
your DeviceClasses, ResourceClaimTemplates, ResourceClaims and Pods work on a
given inventory:

  - every CEL selector (class selectors, request selectors, firstAvailable
    subrequests) is compiled with the Kubernetes DRA CEL environment and the
    API server's length and cost limits; errors show the file, document,
    object, field and the expression with a caret;
  - attributes the inventory never publishes (a capacity used as an attribute
    gets "use device.capacity[...]"), capacities and driver names it does not
    have, comparisons of a version with a string, classes that match nothing;
  - each selector is evaluated on every device: which devices each class and
    request matches, and which devices make an expression fail at run time
    (the scheduler stops on those);
  - each claim (a pod's claims together) is allocated with the real scheduler
    allocator (k8s.io/dynamic-resource-allocation/structured) using the
    feature set of --kubernetes-version, with the devices it gets, or why it
    can never be satisfied (no device matches, not enough on one node,
    matchAttribute cannot be met, counters exhausted, held by earlier claims).

The inventory is the ResourceSlices in the inputs, or (by default, or with
--profile) what gpudra's own slice builder publishes on --nodes fake nodes of
a profile: ` + strings.Join(nvmlfake.Profiles(), ", ") + `, or a profile file.
gpudra's DeviceClasses are built in; a class in the inputs replaces the built-in
one of the same name.

Exit status: 0 no findings, 1 findings, 2 unusable input (unreadable or
malformed YAML, an unknown kind, an empty file, bad flags).`,
		Example: `  # the shipped DeviceClasses and examples on a fake DGX H100
  gpudra check --examples

  # your manifests on 4 fake DGX A100 nodes, as Kubernetes 1.34 would do it
  gpudra check --profile dgx-a100 --nodes 4 --kubernetes-version 1.34 ./manifests/

  # what fits together on one mixed node (H100 island, A100 island, an L4)
  gpudra check --profile mixed --sequential claims.yaml pods.yaml

  # against ResourceSlices taken from a cluster, for CI
  kubectl get resourceslices -o yaml > slices.yaml
  gpudra check -o json slices.yaml ./manifests/ | jq '.findings'

  # a selector from standard input
  cat <<'YAML' | gpudra check -
  apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: big-gpu}
  spec:
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.gpudra.io
            selectors:
            - cel:
                expression: device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0
  YAML`,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := runCheck(cmd, args, opts, output, verbose, builtinExamples)
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Profile, "profile", "", "fake GPU profile for the inventory ("+strings.Join(nvmlfake.Profiles(), ", ")+", or a profile file); default "+check.DefaultProfile+" when the inputs hold no ResourceSlices")
	f.IntVar(&opts.Nodes, "nodes", 1, "number of fake nodes of --profile")
	f.StringVar(&opts.DriverName, "driver-name", check.DefaultDriverName, "DRA driver name the fake nodes publish, as the plugin's --driver-name")
	f.StringVar(&opts.KubernetesVersion, "kubernetes-version", check.DefaultKubernetesVersion, "feature set of this Kubernetes version's scheduler and API server ("+strings.Join(check.KubernetesVersions, ", ")+")")
	f.BoolVar(&opts.Sequential, "sequential", false, "allocate claims one after the other in input order, each keeping its devices, to see what fits together")
	f.BoolVar(&opts.BuiltinClasses, "builtin-classes", true, "add gpudra's shipped DeviceClasses that the inputs do not define")
	f.IntVar(&opts.ListLimit, "list-limit", 64, "list matching devices by name up to this many; count them beyond")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.BoolVarP(&verbose, "verbose", "v", false, "also list every selector with its type, cost and match count, and the notes (findings that do not count, e.g. a catalog class no claim uses matching nothing)")
	f.BoolVar(&builtinExamples, "examples", false, "also check the DeviceClasses and examples built into this binary (deviceclasses/)")
	return cmd
}

func runCheck(cmd *cobra.Command, args []string, opts check.Options, output string, verbose, examples bool) int {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gpudra check:", err)
		return check.ExitInput
	}
	if output != "text" && output != "json" {
		return fail(fmt.Errorf("-o %q: want text or json", output))
	}
	if len(args) == 0 && !examples {
		return fail(errors.New("give YAML files or directories to check (or - for standard input, or --examples); see gpudra check --help"))
	}
	in, err := check.LoadPaths(args, func() ([]byte, error) { return io.ReadAll(cmd.InOrStdin()) })
	if err != nil {
		return fail(err)
	}
	if examples {
		ex, err := check.LoadFS(deviceclasses.FS, "deviceclasses")
		if err != nil {
			return fail(err)
		}
		in.Merge(ex)
	}
	opts.Inputs = in
	rep, err := check.Run(cmd.Context(), opts)
	if err != nil {
		return fail(err)
	}
	out := cmd.OutOrStdout()
	if output == "json" {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out, verbose)
	}
	if err != nil {
		return fail(err)
	}
	return rep.ExitCode
}
