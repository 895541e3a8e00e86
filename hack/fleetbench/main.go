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

// Command fleetbench measures the real kube-scheduler on a fleet of fake
// GPU nodes: how many pods with ResourceClaims it schedules per second, and
// how long each takes, for gpudra's ResourceSlice layout and two others
// published the same way. bench-fleet.sh (make bench-fleet) starts a fresh
// control plane for every fleet size and layout and calls
//
//	fleetbench setup  one fleet size and layout: nodes and ResourceSlices,
//	                  before kube-scheduler starts
//	fleetbench run    the workloads, with kube-scheduler running; results
//	                  as JSON
//	fleetbench report every run's JSON into docs/measurements/fleet.md and SVG
//	                  charts in docs/img
//
// No kubelet runs: nodes are Node objects created Ready, as Kubernetes'
// scheduler_perf does, and pods are bound, never started. Traffic goes only
// to the control plane on 127.0.0.1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

func main() {
	klog.InitFlags(nil)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fleetbench setup|run|report [flags]")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "setup":
		err = setupCmd(ctx, os.Args[2:])
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want setup, run or report", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

// clientFlags are the flags every command that talks to the control plane
// takes.
type clientFlags struct {
	kubeconfig *string
	nodes      *int
	layout     *string
	profile    *string
	out        *string
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		kubeconfig: fs.String("kubeconfig", "", "admin kubeconfig of the control plane"),
		nodes:      fs.Int("nodes", 100, "fleet size"),
		layout:     fs.String("layout", layoutGpudra, "ResourceSlice layout: gpudra, whole-gpus or nvidia-shaped"),
		profile:    fs.String("profile", "dgx-h100", "fake GPU profile of every node: dgx-h100 (8 GPUs on one NVLink island) or gb200-tray (4 GPUs, racks of 18 trays, each rack an NVLink domain with its channel pool)"),
		out:        fs.String("out", "", "results file (JSON): setup writes it, run completes it"),
	}
}

func (c clientFlags) client() (*rest.Config, kubernetes.Interface, error) {
	if *c.kubeconfig == "" || *c.out == "" {
		return nil, nil, fmt.Errorf("--kubeconfig and --out are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *c.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// No client-side rate limit: the benchmark measures the scheduler.
	// Protobuf: the API server decodes large ResourceSlices much faster.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}

// setupCmd creates the fleet (nodes, DeviceClasses, every node's slices in
// the layout) before kube-scheduler starts, so that publishing does not
// compete with it, and records what that cost.
func setupCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	c := addClientFlags(fs)
	apiserverPID := fs.Int("apiserver-pid", 0, "kube-apiserver's PID, for its memory")
	channels := fs.Int("nvlink-channels", slicebuilder.DefaultChannels, "exclusive channels in each NVLink domain's pool (gb200-tray fleets), as gpudra-controller's --nvlink-channels")
	_ = fs.Parse(args)
	if err := slicebuilder.ValidateChannels(*channels); err != nil {
		return err
	}
	_, client, err := c.client()
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	result := runResult{Nodes: *c.nodes, Layout: *c.layout, Profile: *c.profile, Started: time.Now().UTC()}
	f, err := setUp(ctx, client, *c.nodes, *c.profile)
	if err != nil {
		return err
	}
	logger.Info("Nodes created", "nodes", *c.nodes)
	if result.Publish, err = f.publish(ctx, *c.profile, *c.layout, *channels); err != nil {
		return err
	}
	logger.Info("ResourceSlices published", "layout", *c.layout, "slices", result.Publish.Slices, "seconds", result.Publish.Seconds)
	if *apiserverPID != 0 {
		if result.APIServerRSSMiB, _, err = processMemory(*apiserverPID); err != nil {
			return err
		}
	}
	return writeResult(*c.out, result)
}

// runCmd runs every workload against the fleet setup made, with
// kube-scheduler running, and completes the results.
func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	c := addClientFlags(fs)
	maxPods := fs.Int("max-pods", 200, "most pods one workload runs")
	cellTimeout := fs.Duration("cell-timeout", 3*time.Minute, "how long one workload may take to be scheduled")
	metricsURL := fs.String("scheduler-metrics", "", "kube-scheduler's /metrics URL")
	apiserverPID := fs.Int("apiserver-pid", 0, "kube-apiserver's PID, for its memory")
	schedulerPID := fs.Int("scheduler-pid", 0, "kube-scheduler's PID, for its memory")
	only := fs.String("only", "", "comma-separated cells to run, as workload/state (e.g. gpu1/90%); default: all")
	churnDuration := fs.Duration("churn-duration", time.Minute, "how long the steady-state churn workload runs")
	churnPods := fs.Int("churn-pods", 10, "pods the steady-state churn workload keeps in flight")
	_ = fs.Parse(args)
	if *metricsURL == "" || *apiserverPID == 0 || *schedulerPID == 0 {
		return fmt.Errorf("run needs --scheduler-metrics, --apiserver-pid and --scheduler-pid")
	}
	cfg, client, err := c.client()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(*c.out)
	if err != nil {
		return fmt.Errorf("results of setup: %w", err)
	}
	var result runResult
	if err := json.Unmarshal(data, &result); err != nil {
		return fmt.Errorf("%s: %w", *c.out, err)
	}
	metrics, err := newSchedulerMetrics(cfg, *metricsURL)
	if err != nil {
		return err
	}
	f := existingFleet(client, result.Nodes)
	f.profile = result.Profile
	binds, err := watchBinds(ctx, f)
	if err != nil {
		return err
	}
	writes, err := watchWrites(ctx, client)
	if err != nil {
		return err
	}
	r := &runner{fleet: f, profile: result.Profile, writes: writes, metrics: metrics, maxPods: *maxPods, cellTimeout: *cellTimeout, binds: binds, only: map[string]bool{},
		schedulerPID: *schedulerPID, churnDuration: *churnDuration, churnPods: *churnPods}
	for _, c := range strings.Split(*only, ",") {
		if c != "" {
			r.only[c] = true
		}
	}
	result.Cells, err = r.run(ctx, result.Layout)
	// Whatever happened, keep what was measured.
	if _, peak, merr := processMemory(*apiserverPID); merr == nil {
		result.APIServerPeakMiB = peak
	}
	if rss, _, merr := processMemory(*schedulerPID); merr == nil {
		result.SchedulerRSSMiB = rss
	}
	if werr := writeResult(*c.out, result); werr != nil {
		return werr
	}
	return err
}

func writeResult(path string, result runResult) error {
	data, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
