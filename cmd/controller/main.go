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

// Command gpudra-controller is gpudra's cluster-side component: it
// validates gpudra's opaque configs at admission (a webhook with its own
// serving certificate, or cert-manager's) and exports fleet metrics
// (devices published, allocated and tainted, pending claims, stranded
// GPUs).
// Run it as a Deployment (see deployments/helm/gpudra); with more than one
// replica, leader election picks the one that exports the fleet metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/admission"
	"github.com/gpudra/gpudra/internal/cmdline"
	"github.com/gpudra/gpudra/internal/controller"
	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/servingcert"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	gpudraversion "github.com/gpudra/gpudra/internal/version"
)

type flags struct {
	driverName        string
	kubeconfig        string
	namespace         string
	identity          string
	leaseName         string
	leaseDuration     time.Duration
	renewDeadline     time.Duration
	retryPeriod       time.Duration
	metricsAddr       string
	webhookAddr       string
	webhookService    string
	webhookConfigs    []string
	certSecret        string
	certFile          string
	keyFile           string
	clusterDomain     string
	recomputeInterval time.Duration
	migSpareNodes     string
	migSparesCM       string
	migSpareDemand    bool
	migSparePools     []string
	fleetAccounting   bool
	nvlinkChannels    int
	memoryLimitRatio  float64
	webhookTimeout    time.Duration
	webhookInFlight   string
	webhookMaxConns   int
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpudra-controller:", err)
		os.Exit(gpudraversion.ExitCode(err)) // 2: a bad command line
	}
}

// newFlags defines the controller's flags, their defaults (those of
// controller.Config where it has one) and the environment variables that
// set them.
func newFlags() (*flags, *cmdline.Command) {
	f := &flags{}
	host, _ := os.Hostname()
	cmd := cmdline.New("gpudra-controller")
	fs := cmd.Flags
	fs.StringVar(&f.driverName, "driver-name", gpu.DefaultDriverName, "DRA driver whose configs are validated and whose devices are accounted for.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig file; empty means in-cluster config.")
	fs.StringVar(&f.namespace, "namespace", "gpudra", "The controller's namespace: its leader Lease and certificate Secret live there.")
	fs.StringVar(&f.identity, "identity", host, "This replica's name in the leader Lease.")
	fs.StringVar(&f.leaseName, "leader-election-lease", "gpudra-controller", "Lease for leader election; empty turns leader election off (run one replica only).")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", controller.DefaultLeaseDuration, "How long a leader's lease lasts without renewal.")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", controller.DefaultRenewDeadline, "How long the leader retries renewing before it gives up leadership (and exits).")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", controller.DefaultRetryPeriod, "How often candidates try to acquire or renew the lease.")
	fs.StringVar(&f.metricsAddr, "metrics-address", ":8080", "Address of the HTTP server for /metrics, /healthz and /readyz.")
	fs.StringVar(&f.webhookAddr, "webhook-address", ":9443", "Address of the admission webhook's HTTPS server; empty turns the webhook off.")
	defaults := admission.DefaultLimits()
	fs.DurationVar(&f.webhookTimeout, "webhook-timeout", defaults.Timeout, "Longest a review may take, from its first byte to its answer (reading headers and body, judging it): the webhook's timeoutSeconds, past which the API server gives up anyway.")
	fs.StringVar(&f.webhookInFlight, "webhook-max-inflight-bytes", resource.NewQuantity(defaults.MaxInFlightBytes, resource.BinarySI).String(), "Memory the reviews in flight may hold together (bodies, what is read from them, the work of judging them), a quantity such as 32Mi; a review that finds no room gets HTTP 429. At least what the largest review the API server can send takes (about 18Mi).")
	fs.IntVar(&f.webhookMaxConns, "webhook-max-connections", defaults.MaxConnections, "Connections to the webhook open at once; more wait to be accepted.")
	fs.StringVar(&f.webhookService, "webhook-service", "gpudra-controller", "Service the API server reaches the webhook through; its DNS names go into the self-managed certificate.")
	cmd.ListVar(&f.webhookConfigs, "webhook-configuration", []string{"gpudra-controller"}, "ValidatingWebhookConfiguration(s), comma-separated, whose caBundle the self-managed certificate's CA is injected into.")
	fs.StringVar(&f.certSecret, "cert-secret", "gpudra-controller-webhook-cert", "Secret in --namespace that holds the self-managed CA and serving certificate (ignored with --tls-cert-file).")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "Serving certificate managed by someone else (cert-manager), re-read when it changes; with it, no Secret is managed and no caBundle injected.")
	fs.StringVar(&f.keyFile, "tls-private-key-file", "", "Key of --tls-cert-file.")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "The cluster's DNS domain, for the certificate's fully qualified service name.")
	fs.DurationVar(&f.recomputeInterval, "recompute-interval", controller.DefaultRecomputeInterval, "Least time between two fleet metric recomputes; changes in between fold into the next one.")
	fs.StringVar(&f.migSpareNodes, "mig-spare-nodes", migspares.DefaultTarget, "Nodes across the fleet that keep a free GPU's MIG placements published, for the plugins with --mig-spare-gpus=fleet, however little they partition: a number, or a percent of the ready nodes with a partitionable GPU (rounded up); at least 2 (or every such node, when fewer), spread over the node pools by size, at least one each. --mig-spare-follow-demand raises a pool that runs partitions above it. 0 turns it off: plugins in fleet mode then publish no spares beyond their partitioned GPUs and those whose placements are published already. Needs --fleet-accounting.")
	fs.BoolVar(&f.migSpareDemand, "mig-spare-follow-demand", true, "Raise each node pool's spare nodes above --mig-spare-nodes as its recent GPU claims turn to MIG partitions: from a share of 10% partitions up to a spare on every node of the pool at 25% (docs/mig.md, \"Spares that follow demand\"); false keeps --mig-spare-nodes' budget, spread over the pools by size.")
	cmd.ListVar(&f.migSparePools, "mig-spare-pool-labels", fleet.DefaultPoolLabels, "Node labels that name a node's pool, comma-separated, the first a node carries counts: each pool's spares follow its own demand. Nodes with none of them are one pool. Empty: the fleet is one pool.")
	fs.StringVar(&f.migSparesCM, "mig-spares-configmap", controller.DefaultMigSparesConfigMap, "ConfigMap in --namespace the spare nodes are written into (node name: spares), which the plugins in fleet mode read; the chart creates it, the controller only gets and updates it.")
	fs.IntVar(&f.nvlinkChannels, "nvlink-channels", slicebuilder.DefaultChannels, "Exclusive IMEX channels (channel-1 to channel-N) in each NVLink domain's pool, besides the shared channel-0; at most 2047. The leader labels every node with its GPUs' NVLink domain (gpu.gpudra.io/nvlink-domain) and publishes one pool per domain (docs/nvlink.md). 0 turns both off. Needs --fleet-accounting.")
	fs.BoolVar(&f.fleetAccounting, "fleet-accounting", true, "Run the fleet accounting (informers and fleet metrics) on the leader; false serves the webhook alone, with memory that does not grow with the fleet.")
	fs.Float64Var(&f.memoryLimitRatio, "memory-limit-ratio", 0.9, "Keep the Go heap under this fraction of the container's memory limit (env "+memoryLimitEnv+", bytes; the chart sets it from resources.limits.memory), as GOMEMLIMIT does; 0 turns it off. A GOMEMLIMIT in the environment takes precedence.")
	// What the chart sets through the environment (controller-deployment.yaml).
	cmd.Env(map[string]string{
		"driver-name": "DRIVER_NAME",
		"kubeconfig":  "KUBECONFIG",
		"namespace":   "POD_NAMESPACE",
		"identity":    "POD_NAME",
	})
	cmd.Description = description
	cmd.Section("cluster", "driver-name", "kubeconfig", "namespace", "identity")
	cmd.Section("leader election", "leader-election-lease", "leader-election-lease-duration", "leader-election-renew-deadline", "leader-election-retry-period")
	cmd.Section("admission webhook", "webhook-address", "webhook-timeout", "webhook-max-inflight-bytes", "webhook-max-connections",
		"webhook-service", "webhook-configuration", "cert-secret", "tls-cert-file", "tls-private-key-file", "cluster-domain")
	cmd.Section("fleet", "fleet-accounting", "recompute-interval", "mig-spare-nodes", "mig-spare-follow-demand", "mig-spare-pool-labels", "mig-spares-configmap", "nvlink-channels")
	cmd.Section("metrics and memory", "metrics-address", "memory-limit-ratio")
	return f, cmd
}

// description is what --help says first.
const description = `gpudra-controller is the cluster side of gpudra, a Kubernetes DRA driver for
NVIDIA GPUs. It validates gpudra's opaque GPU configs at admission (a webhook
with its own serving certificate, or cert-manager's) and, on the replica that
holds the leader lease, accounts for the fleet: devices published, allocated
and tainted, pending claims and stranded GPUs as metrics, the nodes that keep
MIG spares, and each node's NVLink domain label. Run it as the Helm chart's
Deployments (deployments/helm/gpudra).

A flag whose help names an environment variable can also be set through it;
the command line wins, and an empty variable counts as unset.
Exit status: 0 when stopped (SIGTERM, SIGINT) or after --help and --version;
2 for a bad command line or environment (an unknown flag, a value that does
not parse or cannot be used); 1 for a failure at run time.`

// usage marks a flag's value that cannot be run with as a bad command
// line: the controller exits 2 for it, 1 for a failure at run time.
func usage(err error) error { return gpudraversion.UsageError{Err: err} }

func run(args []string) error {
	f, cmd := newFlags()
	if exit, err := cmd.Parse(args); exit || err != nil {
		return err
	}
	defer logs.FlushLogs()
	if (f.certFile == "") != (f.keyFile == "") {
		return usage(errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	logger := klog.LoggerWithValues(klog.Background(), "identity", f.identity)
	ctx = klog.NewContext(ctx, logger)
	if limit, err := applySoftMemoryLimit(f.memoryLimitRatio); err != nil {
		return err
	} else if limit > 0 {
		logger.Info("Soft memory limit set", "bytes", limit, "ratio", f.memoryLimitRatio)
	}

	cfg, err := f.controllerConfig()
	if err != nil {
		return err
	}
	if cfg.Client, err = kubeClient(cmd, f.kubeconfig); err != nil {
		return err
	}
	if err := f.listen(&cfg); err != nil {
		return err
	}
	err = controller.Run(ctx, cfg)
	if errors.Is(err, controller.ErrLostLeadership) {
		logger.Info("Lost the leader lease; exiting so that the next start is clean")
	}
	return err
}

// controllerConfig checks the flags and turns them into the controller's
// configuration; run adds the client, the listeners and the
// certificates. A bad flag is a usage error.
func (f *flags) controllerConfig() (controller.Config, error) {
	inFlight, err := resource.ParseQuantity(f.webhookInFlight)
	if err != nil {
		return controller.Config{}, usage(fmt.Errorf("--webhook-max-inflight-bytes=%s: %w", f.webhookInFlight, err))
	}
	limits := admission.Limits{Timeout: f.webhookTimeout, MaxInFlightBytes: inFlight.Value(), MaxConnections: f.webhookMaxConns}
	if err := limits.Validate(); f.webhookAddr != "" && err != nil {
		return controller.Config{}, usage(err)
	}
	spareNodes, err := migspares.ParseTarget(f.migSpareNodes)
	if err != nil {
		return controller.Config{}, usage(fmt.Errorf("--mig-spare-nodes=%s: %w", f.migSpareNodes, err))
	}
	if f.nvlinkChannels != 0 {
		if err := slicebuilder.ValidateChannels(f.nvlinkChannels); err != nil {
			return controller.Config{}, usage(fmt.Errorf("--nvlink-channels: %w", err))
		}
	}
	if !f.fleetAccounting && f.webhookAddr == "" {
		return controller.Config{}, usage(errors.New("--fleet-accounting=false with an empty --webhook-address leaves the controller nothing to do: keep one of them"))
	}
	cfg := controller.Config{
		DriverName:         f.driverName,
		Namespace:          f.namespace,
		Identity:           f.identity,
		LeaseName:          f.leaseName,
		LeaseDuration:      f.leaseDuration,
		RenewDeadline:      f.renewDeadline,
		RetryPeriod:        f.retryPeriod,
		RecomputeInterval:  f.recomputeInterval,
		FleetAccounting:    f.fleetAccounting,
		WebhookLimits:      limits,
		MigSparesConfigMap: f.migSparesCM,
	}
	if f.fleetAccounting {
		// Without the accounting there is no fleet view to pick from.
		cfg.MigSpareNodes = spareNodes
		cfg.MigSpareFollowDemand = f.migSpareDemand
		cfg.MigSparePoolLabels = f.migSparePools
		cfg.NVLinkChannels = f.nvlinkChannels
	}
	return cfg, nil
}

// listen opens the metrics and webhook listeners, and sets where the
// webhook's serving certificate comes from: the files given, or a Secret
// the controller keeps (servingcert) for the webhook Service's names.
func (f *flags) listen(cfg *controller.Config) error {
	var err error
	if cfg.MetricsListener, err = net.Listen("tcp", f.metricsAddr); err != nil {
		return fmt.Errorf("--metrics-address: %w", err)
	}
	if f.webhookAddr == "" {
		return nil
	}
	if cfg.WebhookListener, err = net.Listen("tcp", f.webhookAddr); err != nil {
		return fmt.Errorf("--webhook-address: %w", err)
	}
	if f.certFile != "" {
		cfg.Certificates = &servingcert.FileSource{CertFile: f.certFile, KeyFile: f.keyFile}
		return nil
	}
	svc := f.webhookService + "." + f.namespace + ".svc"
	cfg.Certificates, err = servingcert.NewManager(servingcert.Config{
		Client:                cfg.Client,
		Namespace:             f.namespace,
		SecretName:            f.certSecret,
		DNSNames:              []string{svc, svc + "." + f.clusterDomain},
		WebhookConfigurations: f.webhookConfigs,
	})
	return err
}

// kubeClient is the API client, speaking protobuf for the large lists the
// fleet accounting reads.
func kubeClient(cmd *cmdline.Command, kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := cmd.KubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = controller.ContentType
	cfg.AcceptContentTypes = controller.ContentType + ",application/json"
	return kubernetes.NewForConfig(cfg)
}
