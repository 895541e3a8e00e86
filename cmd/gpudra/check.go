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
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/clusterread"
	"github.com/gpudra/gpudra/internal/dryrun"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/textsafe"
)

func newCheckCommand() *cobra.Command {
	cf := &checkFlags{mps: true}
	cmd := &cobra.Command{
		Use:     "check [FILE|DIR|-]...",
		Short:   "Compile, evaluate and allocate DRA selectors offline: DeviceClasses, claims, templates, pods",
		Long:    checkHelpIntro + profileList() + checkHelpRest,
		Example: checkExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			cf.opts.MPSDisabled = !cf.mps
			cf.srv.dryRun = cf.srv.dryRun || cf.srv.server != ""
			code := runCheck(cmd, args, *cf)
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

// checkFlags are check's flags, as the command line set them.
type checkFlags struct {
	opts     check.Options
	inv      inventoryFlags
	srv      serverFlags
	cluster  clusterFlags
	output   string
	verbose  bool
	examples bool // --examples
	mps      bool
}

// register defines check's flags on cmd. The list is long but flat, one
// flag a line in the order --help shows them: split, it would only hide
// which flag sets what.
func (cf *checkFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&cf.inv.profile, "profile", "", "fake GPU profile for the inventory ("+profileList()+", or a profile file); default "+defaultFakeProfile+" when the inputs hold no ResourceSlices")
	f.IntVar(&cf.inv.nodes, "nodes", 1, "number of fake nodes of --profile")
	f.BoolVar(&cf.inv.pool.consumableCapacity, "consumable-capacity", false, "the fake nodes publish shareable GPUs, as a node pool with the chart's consumableCapacity.enabled does (default with --examples, whose sharing examples are for such pools)")
	f.StringVar(&cf.inv.migProfiles, "mig-profiles", "all", "MIG profiles the fake nodes publish, as the plugin's --mig-profiles: all, none, or e.g. 1g.10gb,3g.40gb,7g.80gb")
	f.StringVar(&cf.inv.migSpareGPUs, "mig-spare-gpus", strconv.Itoa(slicebuilder.DefaultSpareGPUs), "free GPUs per fake node that publish their MIG placements (the fake nodes are idle: no GPU is partitioned yet), "+spareGPUsUsage)
	f.StringVar(&cf.opts.DriverName, "driver-name", gpu.DefaultDriverName, "DRA driver name the fake nodes publish, as the plugin's --driver-name")
	f.StringVar(&cf.opts.KubernetesVersion, "kubernetes-version", scheduler.DefaultKubernetesVersion, "feature set of this Kubernetes version's scheduler and API server ("+strings.Join(scheduler.KubernetesVersions, ", ")+")")
	f.BoolVar(&cf.srv.dryRun, "server-dry-run", false, "also apply every input object to a real cluster's API server with a server-side dry run (kubectl apply --server-side --dry-run=server), which stores nothing: its validation and admission (gpudra's webhook too) judge them; the cluster of the kubeconfig's context (--kubeconfig, --context)")
	f.StringVar(&cf.srv.server, "server", "", "the API server of the dry run, over the kubeconfig's (implies --server-dry-run)")
	f.BoolVar(&cf.opts.Strict, "strict", false, "exit with status 1 on warnings too (things that work but are probably not what you meant, or that check could not check)")
	f.BoolVar(&cf.mps, "mps", true, "the node pool runs MPS control daemons, as the chart's mps.enabled; with false, claims that ask for MPS fail to prepare")
	f.StringVar(&cf.opts.ShareSharing, "consumable-capacity-sharing", "MPS", "how a claim holding a share of a GPU shares it when its config does not say, as the chart's consumableCapacity.sharing: MPS, TimeSlicing or None")
	f.BoolVar(&cf.opts.Sequential, "sequential", false, "allocate claims one after the other in input order, each keeping its devices, to see what fits together")
	f.BoolVar(&cf.opts.BuiltinClasses, "builtin-classes", true, "add gpudra's shipped DeviceClasses that the inputs do not define")
	f.IntVar(&cf.opts.ListLimit, "list-limit", 64, "list matching devices by name up to this many; count them beyond")
	outputFlag(cmd, &cf.output, "text", "text", "json", "yaml")
	f.BoolVar(&cf.verbose, "verbose", false, "also list every selector with its type, cost and match count, and the notes (findings that do not count, e.g. a catalog class no claim uses matching nothing)")
	f.BoolVar(&cf.examples, "examples", false, "also check the DeviceClasses and examples built into this binary (deviceclasses/)")
	f.BoolVar(&cf.cluster.on, "cluster", false, "check against a live cluster's ResourceSlices, DeviceClasses and allocated claims (what fits right now), read through the kubeconfig")
	// kubectl's flags (--kubeconfig, --context, --as, --request-timeout,
	// ...) for --cluster and --server-dry-run; check's own --cluster and
	// --server mean other things than kubectl's.
	cf.cluster.kube = addKubectlFlags(cmd, "cluster", "server", "namespace")
}

// clusterFlags are check --cluster's.
type clusterFlags struct {
	on   bool
	kube *kubectlFlags
}

// clusterInventory points opts at a live cluster's slices, classes and
// allocated claims.
func clusterInventory(ctx context.Context, opts *check.Options, c clusterFlags, versionGiven bool) error {
	client, _, err := c.kube.connect("gpudra-check")
	if err != nil {
		return err
	}
	snap, err := clusterread.Read(ctx, client, clusterread.Want{Classes: true, Slices: true, Claims: true})
	if err != nil {
		return err
	}
	// The feature set is the cluster's own, not the newest check knows:
	// what the plugin publishes (MIG placements or whole GPUs only)
	// depends on it.
	version, versionNote, err := serverKubernetesVersion(client.Discovery(), opts.KubernetesVersion, versionGiven)
	if err != nil {
		return err
	}
	opts.KubernetesVersion = version
	inputs := map[string]bool{}
	for _, o := range opts.Inputs.Claims {
		inputs[o.Name] = true
	}
	for i := range snap.Slices {
		opts.Slices = append(opts.Slices, &snap.Slices[i])
	}
	for i := range snap.Classes {
		opts.ClusterClasses = append(opts.ClusterClasses, &snap.Classes[i])
	}
	held := 0
	for i := range snap.Claims {
		c := &snap.Claims[i]
		if c.Status.Allocation != nil && !inputs[c.Namespace+"/"+c.Name] {
			opts.Held = append(opts.Held, c)
			held++
		}
	}
	where := "the current context"
	if ctxName := c.kube.overrides.CurrentContext; ctxName != "" {
		where = "context " + ctxName
	}
	opts.BuiltinClasses = false
	opts.SlicesSource = fmt.Sprintf("the cluster of %s: %d ResourceSlices, %d DeviceClasses, %d allocated claims holding devices; %s", where, len(snap.Slices), len(snap.Classes), held, versionNote)
	return nil
}

// serverKubernetesVersion is the Kubernetes version to check a live
// cluster as: the one its API server reports, or the nearest check knows
// (scheduler.KubernetesVersions), unless --kubernetes-version was given
// (given, explicit). note says which, for the report.
func serverKubernetesVersion(d discovery.ServerVersionInterface, given string, explicit bool) (version, note string, err error) {
	info, err := d.ServerVersion()
	if err != nil {
		return "", "", fmt.Errorf("the API server's version: %w", err)
	}
	// Some providers report a minor version such as "35+".
	minor, err := strconv.Atoi(strings.TrimRight(info.Minor, "+"))
	if err != nil || info.Major != "1" {
		return given, fmt.Sprintf("the API server reports version %q.%q, which check cannot read: checked as Kubernetes %s", info.Major, info.Minor, given), nil
	}
	server := fmt.Sprintf("1.%d", minor)
	known := scheduler.KubernetesVersions
	switch {
	case explicit && server != given:
		return given, fmt.Sprintf("the API server runs Kubernetes %s; checked as %s (--kubernetes-version)", server, given), nil
	case explicit || slices.Contains(known, server):
		return server, fmt.Sprintf("Kubernetes %s (the API server's version)", server), nil
	case minor < minorOf(known[0]):
		return known[0], fmt.Sprintf("the API server runs Kubernetes %s, older than check knows: checked as %s", server, known[0]), nil
	default:
		newest := known[len(known)-1]
		return newest, fmt.Sprintf("the API server runs Kubernetes %s, newer than check knows: checked as %s", server, newest), nil
	}
}

// minorOf is the minor number of a version "1.N" (0 when it is none).
func minorOf(v string) int {
	_, m, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(m)
	return n
}

// inventoryFlags choose the fake nodes the inventory is built from.
type inventoryFlags struct {
	profile      string
	nodes        int
	pool         fakePool
	migProfiles  string
	migSpareGPUs string
}

// fakePool is how the fake nodes' plugin publishes (fakenodes.Pool's
// settings that check's flags set).
type fakePool struct {
	consumableCapacity bool
	migProfiles        slicebuilder.MigProfiles
	spareGPUs          slicebuilder.SpareGPUs
	// spareNodes, in fleet mode, is how many of the nodes
	// gpudra-controller keeps a spare on (fleetSpareNodes).
	spareNodes int
}

// defaultFakeProfile is fakenodes.DefaultProfile (a test keeps them
// equal), which the build without cgo cannot import.
const defaultFakeProfile = "dgx-h100"

// profileList names the fake profiles for the help, or says there are
// none in this build.
func profileList() string {
	if p := fakeProfiles(); len(p) > 0 {
		return strings.Join(p, ", ")
	}
	return "none in this build, which has no cgo"
}

// serverFlags choose the API server of the dry run: the kubeconfig's
// (--kubeconfig, --context, shared with --cluster), or --server over it.
type serverFlags struct {
	dryRun bool
	server string
}

// runCheck runs gpudra check and returns its exit status; what went
// wrong is on cmd's stderr.
func runCheck(cmd *cobra.Command, args []string, cf checkFlags) int {
	stderr := cmd.ErrOrStderr()
	// A long run shows how far it got, on a terminal only; the line goes
	// before anything else is written.
	prog := newProgress(stderr)
	defer prog.clear()
	cf.opts.Progress = prog.report
	// Errors can quote the cluster's or the manifests' data.
	fail := func(code int, err error) int {
		prog.clear()
		fmt.Fprintln(stderr, "gpudra check:", textsafe.Text(err.Error()))
		return code
	}
	if err := checkOutput(cmd, cf.output); err != nil {
		return fail(check.ExitInput, err)
	}
	in, err := checkInputs(cmd, args, &cf)
	if err != nil {
		return fail(check.ExitInput, err)
	}
	cf.opts.Inputs = in
	done, code, err := checkInventory(cmd, &cf, prog)
	if err != nil {
		return fail(code, err)
	}
	defer done()
	rep, err := check.Run(cmd.Context(), cf.opts)
	if err != nil {
		return fail(check.ExitInput, err)
	}
	if cf.srv.dryRun {
		found, err := serverDryRun(cmd.Context(), cf.srv, cf.cluster, in)
		if err != nil {
			return fail(exitFailure, fmt.Errorf("--server-dry-run: %w", err))
		}
		rep.AddFindings(found...)
	}
	prog.clear()
	if err := writeCheckReport(cmd.OutOrStdout(), rep, cf.output, cf.verbose); err != nil {
		return fail(check.ExitInput, err)
	}
	return rep.ExitCode
}

// checkInputs reads the manifests to check: the files and directories
// of args (- for standard input), and with --examples those built in.
func checkInputs(cmd *cobra.Command, args []string, cf *checkFlags) (*scheduler.Manifests, error) {
	if len(args) == 0 && !cf.examples {
		return nil, errors.New("give YAML files or directories to check (or - for standard input, or --examples); see gpudra check --help")
	}
	in, err := scheduler.LoadPaths(args, func() ([]byte, error) { return io.ReadAll(cmd.InOrStdin()) })
	if err != nil {
		return nil, err
	}
	if cf.examples {
		ex, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
		if err != nil {
			return nil, err
		}
		in.Merge(ex)
		// Like make demo's node: the sharing examples need shareable
		// GPUs, and the others take whole GPUs either way.
		if !cmd.Flags().Changed("consumable-capacity") {
			cf.inv.pool.consumableCapacity = true
		}
	}
	return in, nil
}

// checkInventory points cf.opts at the inventory: a live cluster's
// (--cluster), the inputs' ResourceSlices, and what gpudra publishes on
// fake nodes of --profile (by default when the inputs have none), built
// with the plugin's own slice builder. done releases the fake nodes; on
// an error, code is the exit status.
func checkInventory(cmd *cobra.Command, cf *checkFlags, prog *progress) (done func(), code int, err error) {
	inv, opts := &cf.inv, &cf.opts
	nothing := func() {}
	if cf.cluster.on {
		if inv.profile != "" || cf.examples {
			return nothing, check.ExitInput, errors.New("--cluster checks against the cluster's inventory and classes: leave out --profile and --examples")
		}
		if err := clusterInventory(cmd.Context(), opts, cf.cluster, cmd.Flags().Changed("kubernetes-version")); err != nil {
			return nothing, exitFailure, fmt.Errorf("--cluster: %w", err)
		}
	}
	if !cf.cluster.on && inv.profile == "" && len(opts.Inputs.Slices) == 0 {
		inv.profile = defaultFakeProfile
	}
	if inv.profile == "" {
		// Slices from the input files or the cluster: the spare refill
		// is modelled by editing what the nodes publish.
		if err := check.EditRefill(opts); err != nil {
			return nothing, check.ExitInput, fmt.Errorf("--kubernetes-version: %w", err)
		}
		return nothing, 0, nil
	}
	if inv.nodes < 1 {
		return nothing, check.ExitInput, fmt.Errorf("--nodes must be at least 1, got %d", inv.nodes)
	}
	driver := opts.DriverName
	if driver == "" {
		driver = gpu.DefaultDriverName
	}
	mig, err := slicebuilder.ParseMigProfiles(inv.migProfiles)
	if err != nil {
		return nothing, check.ExitInput, fmt.Errorf("--mig-profiles: %w", err)
	}
	inv.pool.migProfiles = mig
	if inv.pool.spareGPUs, err = parseOfflineSpares(inv.migSpareGPUs); err != nil {
		return nothing, check.ExitInput, fmt.Errorf("--mig-spare-gpus: %w", err)
	}
	inv.pool.spareNodes = fleetSpareNodes(inv.pool.spareGPUs, inv.nodes)
	// What the plugin publishes on a cluster of that version, once it
	// fell back to what the API server serves.
	feats, err := scheduler.FeaturesFor(opts.KubernetesVersion)
	if err != nil {
		return nothing, check.ExitInput, fmt.Errorf("--kubernetes-version: %w", err)
	}
	done, err = fakeInventory(cmd.Context(), opts, inv.profile, inv.nodes, driver, inv.pool, feats, func(built int) { prog.report("fake nodes built", built, inv.nodes) })
	if errors.Is(err, errNoNVML) {
		return nothing, exitFailure, err
	}
	if err != nil {
		return nothing, check.ExitInput, err
	}
	return done, 0, nil
}

// serverDryRun applies the inputs to the API server of the kubeconfig,
// or of --server, with a server-side dry run: what it rejects.
func serverDryRun(ctx context.Context, srv serverFlags, cluster clusterFlags, in *scheduler.Manifests) ([]check.Finding, error) {
	// check's --server (the dry run's API server) overrides the
	// kubeconfig's as kubectl's would.
	k := *cluster.kube
	k.overrides.ClusterInfo.Server = srv.server
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	return dryrun.Apply(ctx, cfg, in)
}

// writeCheckReport prints the report as -o asks: text, json or yaml.
func writeCheckReport(out io.Writer, rep *check.Report, output string, verbose bool) error {
	switch output {
	case "json":
		return rep.WriteJSON(out)
	case "yaml":
		var buf bytes.Buffer
		if err := rep.WriteJSON(&buf); err != nil {
			return err
		}
		return writeYAML(out, buf.Bytes())
	default:
		return rep.WriteText(out, verbose)
	}
}
