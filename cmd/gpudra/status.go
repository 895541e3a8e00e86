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
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpudra/gpudra/internal/clusterread"
	"github.com/gpudra/gpudra/internal/clusterstatus"
	"github.com/gpudra/gpudra/internal/gpu"
)

// kubectlFlags are kubectl's own flags for reaching a cluster, as
// client-go's clientcmd defines them for kubectl and its plugins:
// --kubeconfig, --context, --cluster, --user, -n, --as, --as-group,
// --as-uid, --server, --token, --request-timeout and the TLS flags.
// (k8s.io/cli-runtime's ConfigFlags wrap the same; its package links
// kustomize and Go's plugin package, whose BIND_NOW makes the cgo build
// fail to start: go-nvml leaves NVML's symbols to resolve when called.)
type kubectlFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// addKubectlFlags defines them on cmd, less those named in omit
// ("cluster", "server", "namespace": check's --cluster and --server mean
// other things).
func addKubectlFlags(cmd *cobra.Command, omit ...string) *kubectlFlags {
	k := &kubectlFlags{}
	names := clientcmd.RecommendedConfigOverrideFlags("")
	for _, name := range omit {
		switch name {
		case "cluster":
			names.ContextOverrideFlags.ClusterName.LongName = ""
		case "server":
			names.ClusterOverrideFlags.APIServer.LongName = ""
		case "namespace":
			names.ContextOverrideFlags.Namespace.LongName = ""
		}
	}
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	clientcmd.BindOverrideFlags(&k.overrides, cmd.Flags(), names)
	return k
}

// clientConfig is the client configuration kubectl would use with these
// flags.
func (k *kubectlFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := k.overrides
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
}

// restConfig is the REST client configuration of the cluster they name.
func (k *kubectlFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// connect is a client for the cluster they name, and the namespace in
// effect (-n, else the context's, else default).
func (k *kubectlFlags) connect(userAgent string) (kubernetes.Interface, string, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := k.clientConfig().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := clusterread.ClientFor(cfg, userAgent)
	return client, ns, err
}

func newStatusCommand() *cobra.Command {
	var driver, output string
	var allNamespaces bool
	var kc *kubectlFlags
	cmd := &cobra.Command{
		Use:   "status [NODE]...",
		Short: "Show a cluster's GPUs: who holds each GPU, MIG partition and share, health, what is free",
		Long: `status reads a cluster through your kubeconfig, with kubectl's flags
(--kubeconfig, --context, -n, -A, --as, --request-timeout, ...), and
shows, per node, every GPU gpudra's kubelet plugin publishes: its model, health and device taints, whether it is free, held
whole, shared or partitioned, and for each MIG partition and share the
claim, namespace and pods holding it; then what each node has free: whole
GPUs, room for MIG partitions of each profile, memory left on shared GPUs.
The device UUIDs, sharing and limits come from what the plugin wrote in each
claim's status.devices (-o wide); "prepared" says the plugin reported the
device set up.

As kubectl does, it shows the claims of the context's namespace (or -n's)
by name, and devices held in other namespaces as held by "another
namespace"; -A (--all-namespaces) shows every namespace's claims. It needs
list on resourceslices and resourceclaims (where it may list claims of
its namespace only, what is free is an upper bound, and it says so).

Installed as kubectl-gpudra on PATH, it is kubectl gpudra status.

-o wide adds UUIDs, PCI bus IDs, memory, sharing, taints; -o json and -o
yaml print the whole report.

Exit status: 0, 2 a bad command line, 3 the cluster could not be read.`,
		Example: `  gpudra status
  kubectl gpudra status -o wide
  gpudra status -A
  gpudra status --context prod -n team-a gpu-node-7
  gpudra status -o json | jq '.nodes[].free'`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			return runStatus(cmd, kc, nodes, statusOptions{driver: driver, output: output, allNamespaces: allNamespaces})
		},
	}
	kc = addKubectlFlags(cmd)
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "show the claims of every namespace by name, not only those of the context's namespace (or -n's)")
	cmd.Flags().StringVar(&driver, "driver-name", gpu.DefaultDriverName, "the DRA driver name gpudra runs as (the chart's driverName)")
	outputFlag(cmd, &output, "text", "text", "wide", "json", "yaml")
	cmd.Long = strings.TrimSpace(cmd.Long)
	return cmd
}

// statusOptions are status's own flags.
type statusOptions struct {
	driver, output string
	allNamespaces  bool
}

// runStatus reads the cluster, builds the report for the nodes asked for
// (all when none), notes the nodes without slices, and prints it as -o
// says.
func runStatus(cmd *cobra.Command, kc *kubectlFlags, nodes []string, o statusOptions) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	client, ns, err := kc.connect("gpudra-status")
	if err != nil {
		return err
	}
	show := ns
	if o.allNamespaces {
		if cmd.Flags().Changed("namespace") {
			return usageErrorf("-n and -A (--all-namespaces) do not go together; see %s --help", cmd.CommandPath())
		}
		show = ""
	}
	snap, notes, err := readStatus(cmd.Context(), client, o.driver, show)
	if err != nil {
		return err
	}
	rep := clusterstatus.Build(snap.Slices, snap.Claims, clusterstatus.Options{Driver: o.driver, Namespace: show, Nodes: nodes})
	rep.Notes = append(rep.Notes, notes...)
	for _, n := range nodes {
		found := false
		for _, rn := range rep.Nodes {
			found = found || rn.Name == n
		}
		if !found {
			rep.Notes = append(rep.Notes, fmt.Sprintf("node %s has no ResourceSlices of driver %s", n, o.driver))
		}
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case "text", "wide":
		return rep.WriteText(out, o.output == "wide")
	default:
		return writeObject(out, o.output, rep)
	}
}

// readStatus reads the driver's slices and the claims: every namespace's,
// or, where the user may not list those, only show's (then what is free is
// an upper bound, and a note says so).
func readStatus(ctx context.Context, client kubernetes.Interface, driver, show string) (*clusterread.Snapshot, []string, error) {
	snap, err := clusterread.Read(ctx, client, clusterread.Want{Slices: true, Claims: true, Driver: driver})
	var notes []string
	if err != nil && show != "" && apierrors.IsForbidden(err) {
		// Who holds the GPUs of other namespaces is not this
		// user's to know; what is free then is an upper bound.
		snap, err = clusterread.Read(ctx, client, clusterread.Want{Slices: true, Claims: true, Driver: driver, Namespace: show})
		notes = append(notes, "only namespace "+show+"'s claims could be read: devices held in other namespaces show as free")
	}
	if err != nil {
		return nil, nil, err
	}
	return snap, notes, nil
}
