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

// Command gpudra is gpudra's command-line tool. Most of it needs no cluster,
// no Docker and no GPU: `gpudra check` checks manifests offline, `gpudra
// simulate` runs the kubelet plugin in-process on fake GPUs, `gpudra
// migrate` rewrites NVIDIA-driver manifests, and `gpudra inventory` reads a
// GPU node read-only. `gpudra status` and `gpudra check --cluster` read a
// live cluster through a kubeconfig. Installed as kubectl-gpudra it is the
// kubectl plugin `kubectl gpudra`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/textsafe"
	"github.com/gpudra/gpudra/internal/version"
)

// kubectlPluginName is the name kubectl finds the plugin by: `kubectl
// gpudra …` runs kubectl-gpudra.
const kubectlPluginName = "kubectl-gpudra"

func main() {
	root := newRootCommand(filepath.Base(os.Args[0]))
	root.SetArgs(os.Args[1:])
	os.Exit(execute(context.Background(), root, os.Stderr))
}

// newRootCommand is the gpudra command with every subcommand, as invoked
// under the name invokedAs (gpudra, or kubectl-gpudra from kubectl).
func newRootCommand(invokedAs string) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpudra",
		Short: "Tools for the gpudra DRA driver: check, simulate, migrate, inventory, gpu-check, status",
		Long: `gpudra is the command-line tool of gpudra, a Kubernetes DRA driver for NVIDIA
GPUs. check, simulate and migrate need no cluster and no GPU; inventory and
gpu-check read a GPU node's driver read-only; status and check --cluster read a
cluster through a kubeconfig. Installed as kubectl-gpudra on PATH it is the
kubectl plugin: kubectl gpudra status.

Every subcommand takes -o json and -o yaml, reads standard input where a
file is named -, and exits with one of:
  0  success
  1  the answer is no: findings, differences, examples that cannot run,
     manifests without an equivalent, failed gpu-check steps
  2  a bad command line (unknown flag or command, bad flag value) or unusable input
  3  the command could not do its work: no NVML or GPU, no cluster
(each subcommand's help says which it uses).`,
		Version:                    version.Get().String(),
		SuggestionsMinimumDistance: 2,
		SilenceUsage:               true,
		SilenceErrors:              true,
	}
	root.Long += buildNote
	if invokedAs == kubectlPluginName {
		root.Annotations = withAnnotation(root.Annotations, cobra.CommandDisplayNameAnnotation, "kubectl gpudra")
	}
	root.SetVersionTemplate("{{.DisplayName}} {{.Version}}\n")
	addLogFlags(root)
	// inventory, gpu-check and simulate: the Linux (cgo) build only.
	root.AddCommand(nvmlCommands()...)
	root.AddCommand(newCheckCommand())
	root.AddCommand(newMigrateCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newVersionCommand())
	return root
}

// addLogFlags gives every command kubectl's -v (--v): klog's verbosity,
// the one meaning -v has in gpudra (check's long listing is --verbose).
// The in-process plugin of simulate and gpu-check logs at 10.
func addLogFlags(root *cobra.Command) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := pflag.PFlagFromGoFlag(fs.Lookup("v"))
	v.Shorthand = "v"
	v.Usage = "log verbosity, as kubectl's -v (simulate and gpu-check show the in-process plugin's log at 10)"
	root.PersistentFlags().AddFlag(v)
}

// noSuchCommand refuses an unknown subcommand of a command that groups
// others (cobra would show the help and exit 0).
func noSuchCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return usageErrorf("%s; see %s --help", msg, cmd.CommandPath())
}

// applyConventions makes every command treat a bad command line alike:
// exit 2 with a message that names the fix.
func applyConventions(c *cobra.Command) {
	if c.HasSubCommands() {
		if c.Args == nil {
			c.Args = noSuchCommand
		}
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if strings.Contains(err.Error(), `"-v, --v"`) {
			// gpudra check -v used to be --verbose.
			return usageErrorf("%v (-v is the log verbosity, a number, as kubectl's; check's long listing is --verbose); see %s --help", err, cmd.CommandPath())
		}
		return usageErrorf("%v; see %s --help", err, cmd.CommandPath())
	})
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			if err != nil && exitCodeOf(err) != exitUsage {
				return usageErrorf("%v; see %s --help", err, cmd.CommandPath())
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		applyConventions(sub)
	}
}

// execute runs the command line and returns the exit status, having
// printed the error (unless the command reported it already).
func execute(ctx context.Context, root *cobra.Command, stderr io.Writer) int {
	// cobra's own commands, made now: they write where root does.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	applyConventions(root)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "exit status ") {
		// An error can quote cluster data: nothing in it may move the
		// cursor or forge a line of its own.
		fmt.Fprintf(stderr, "%s: %s\n", root.DisplayName(), textsafe.Text(msg))
	}
	return exitCodeOf(err)
}
