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
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpudra/gpudra/internal/clusterread"
	"github.com/gpudra/gpudra/internal/clusterstatus"
	"github.com/gpudra/gpudra/internal/gpu"
)

// kubeconfigFlags are kubectl's --kubeconfig, --context and -n.
func kubeconfigFlags(cmd *cobra.Command, k *clusterread.Kubeconfig) {
	f := cmd.Flags()
	f.StringVar(&k.Path, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	f.StringVar(&k.Context, "context", "", "kubeconfig context (default: the current one)")
	f.StringVarP(&k.Namespace, "namespace", "n", "", "namespace (default: the context's)")
}

func newStatusCommand() *cobra.Command {
	var kc clusterread.Kubeconfig
	var driver, output string
	cmd := &cobra.Command{
		Use:   "status [NODE]...",
		Short: "Show a cluster's GPUs: who holds each GPU, MIG partition and share, health, what is free",
		Long: `status reads a cluster through your kubeconfig (as kubectl does: --kubeconfig,
--context, -n) and shows, per node, every GPU gpudra's kubelet plugin
publishes: its model, health and device taints, whether it is free, held
whole, shared or partitioned, and for each MIG partition and share the
claim, namespace and pods holding it; then what each node has free: whole
GPUs, room for MIG partitions of each profile, memory left on shared GPUs.
The device UUIDs, sharing and limits come from what the plugin wrote in each
claim's status.devices (-o wide); "prepared" says the plugin reported the
device set up.

Without -n it shows every namespace's claims; with -n, only that
namespace's by name (devices held elsewhere show as held by "another
namespace"). It needs list on resourceslices and resourceclaims.

Installed as kubectl-gpudra on PATH, it is kubectl gpudra status.

-o wide adds UUIDs, PCI bus IDs, memory, sharing, taints; -o json and -o
yaml print the whole report.

Exit status: 0, 2 a bad command line, 3 the cluster could not be read.`,
		Example: `  gpudra status
  kubectl gpudra status -o wide
  gpudra status --context prod -n team-a gpu-node-7
  gpudra status -o json | jq '.nodes[].free'`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			client, ns, err := clusterread.Connect(kc, "gpudra-status")
			if err != nil {
				return err
			}
			show := ""
			if cmd.Flags().Changed("namespace") {
				show = ns
			}
			snap, err := clusterread.Read(cmd.Context(), client, clusterread.Want{Slices: true, Claims: true, Driver: driver})
			var notes []string
			if err != nil && show != "" && apierrors.IsForbidden(err) {
				// Who holds the GPUs of other namespaces is not this
				// user's to know; what is free then is an upper bound.
				snap, err = clusterread.Read(cmd.Context(), client, clusterread.Want{Slices: true, Claims: true, Driver: driver, Namespace: show})
				notes = append(notes, "only namespace "+show+"'s claims could be read: devices held in other namespaces show as free")
			}
			if err != nil {
				return err
			}
			rep := clusterstatus.Build(snap.Slices, snap.Claims, clusterstatus.Options{Driver: driver, Namespace: show, Nodes: nodes})
			rep.Notes = append(rep.Notes, notes...)
			for _, n := range nodes {
				found := false
				for _, rn := range rep.Nodes {
					found = found || rn.Name == n
				}
				if !found {
					rep.Notes = append(rep.Notes, fmt.Sprintf("node %s has no ResourceSlices of driver %s", n, driver))
				}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "text", "wide":
				return rep.WriteText(out, output == "wide")
			default:
				return writeObject(out, output, rep)
			}
		},
	}
	kubeconfigFlags(cmd, &kc)
	cmd.Flags().StringVar(&driver, "driver-name", gpu.DefaultDriverName, "the DRA driver name gpudra runs as (the chart's driverName)")
	outputFlag(cmd, &output, "text", "text", "wide", "json", "yaml")
	cmd.Long = strings.TrimSpace(cmd.Long)
	return cmd
}
