// Command gpudra-controller is gpudra's cluster-side component: it
// validates gpudra's opaque configs at admission (a webhook with its own
// serving certificate, or cert-manager's) and exports fleet metrics
// (devices published and allocated, pending claims, tainted devices).
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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/admission"
	"github.com/gpudra/gpudra/pkg/controller"
	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/servingcert"
	gpudraversion "github.com/gpudra/gpudra/pkg/version"
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
	webhookConfig     string
	certSecret        string
	certFile          string
	keyFile           string
	clusterDomain     string
	recomputeInterval time.Duration
	fleetAccounting   bool
	memoryLimitRatio  float64
	webhookTimeout    time.Duration
	webhookInFlight   string
	webhookMaxConns   int
	logging           *logsapi.LoggingConfiguration
	featureGate       featuregate.MutableVersionedFeatureGate
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gpudra-controller:", err)
		os.Exit(gpudraversion.ExitCode(err)) // 2: a bad command line
	}
}

func newFlags() (*flags, *pflag.FlagSet) {
	f := &flags{logging: logsapi.NewLoggingConfiguration(), featureGate: featuregate.NewVersionedFeatureGate(version.MustParse(baseversion.DefaultKubeBinaryVersion))}
	if err := logsapi.AddFeatureGates(f.featureGate); err != nil {
		panic(err)
	}
	host, _ := os.Hostname()
	fs := pflag.NewFlagSet("gpudra-controller", pflag.ContinueOnError)
	fs.StringVar(&f.driverName, "driver-name", envOr("DRIVER_NAME", gpu.DefaultDriverName), "DRA driver whose configs are validated and whose devices are accounted for (env DRIVER_NAME).")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig file; empty means in-cluster config (env KUBECONFIG).")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "gpudra"), "The controller's namespace: its leader Lease and certificate Secret live there (env POD_NAMESPACE).")
	fs.StringVar(&f.identity, "identity", envOr("POD_NAME", host), "This replica's name in the leader Lease (env POD_NAME).")
	fs.StringVar(&f.leaseName, "leader-election-lease", "gpudra-controller", "Lease for leader election; empty turns leader election off (run one replica only).")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader's lease lasts without renewal.")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader retries renewing before it gives up leadership (and exits).")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates try to acquire or renew the lease.")
	fs.StringVar(&f.metricsAddr, "metrics-address", ":8080", "Address of the HTTP server for /metrics, /healthz and /readyz.")
	fs.StringVar(&f.webhookAddr, "webhook-address", ":9443", "Address of the admission webhook's HTTPS server; empty turns the webhook off.")
	defaults := admission.DefaultLimits()
	fs.DurationVar(&f.webhookTimeout, "webhook-timeout", defaults.Timeout, "Longest a review may take, from its first byte to its answer (reading headers and body, judging it): the webhook's timeoutSeconds, past which the API server gives up anyway.")
	fs.StringVar(&f.webhookInFlight, "webhook-max-inflight-bytes", resource.NewQuantity(defaults.MaxInFlightBytes, resource.BinarySI).String(), "Memory the reviews in flight may hold together (bodies, what is read from them, the work of judging them), a quantity such as 32Mi; a review that finds no room gets HTTP 429. At least what the largest review the API server can send takes (about 18Mi).")
	fs.IntVar(&f.webhookMaxConns, "webhook-max-connections", defaults.MaxConnections, "Connections to the webhook open at once; more wait to be accepted.")
	fs.StringVar(&f.webhookService, "webhook-service", "gpudra-controller", "Service the API server reaches the webhook through; its DNS names go into the self-managed certificate.")
	fs.StringVar(&f.webhookConfig, "webhook-configuration", "gpudra-controller", "ValidatingWebhookConfiguration(s), comma-separated, whose caBundle the self-managed certificate's CA is injected into.")
	fs.StringVar(&f.certSecret, "cert-secret", "gpudra-controller-webhook-cert", "Secret in --namespace that holds the self-managed CA and serving certificate (ignored with --tls-cert-file).")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "Serving certificate managed by someone else (cert-manager), re-read when it changes; with it, no Secret is managed and no caBundle injected.")
	fs.StringVar(&f.keyFile, "tls-private-key-file", "", "Key of --tls-cert-file.")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "The cluster's DNS domain, for the certificate's fully qualified service name.")
	fs.DurationVar(&f.recomputeInterval, "recompute-interval", 10*time.Second, "Least time between two fleet metric recomputes; changes in between fold into the next one.")
	fs.BoolVar(&f.fleetAccounting, "fleet-accounting", true, "Run the fleet accounting (informers and fleet metrics) on the leader; false serves the webhook alone, with memory that does not grow with the fleet.")
	fs.Float64Var(&f.memoryLimitRatio, "memory-limit-ratio", 0.9, "Keep the Go heap under this fraction of the container's memory limit (env "+memoryLimitEnv+", bytes; the chart sets it from resources.limits.memory), as GOMEMLIMIT does; 0 turns it off. A GOMEMLIMIT in the environment takes precedence.")
	logsapi.AddFlags(f.logging, fs)
	f.featureGate.AddFlag(fs)
	return f, fs
}

func run() error {
	f, fs := newFlags()
	if done, err := gpudraversion.ParseFlags(fs, os.Args[1:], "gpudra-controller", os.Stdout); done {
		return err // --help, --version, or a bad command line
	}
	if err := logsapi.ValidateAndApply(f.logging, f.featureGate); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	defer logs.FlushLogs()
	if (f.certFile == "") != (f.keyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
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

	inFlight, err := resource.ParseQuantity(f.webhookInFlight)
	if err != nil {
		return fmt.Errorf("--webhook-max-inflight-bytes=%s: %w", f.webhookInFlight, err)
	}
	limits := admission.Limits{Timeout: f.webhookTimeout, MaxInFlightBytes: inFlight.Value(), MaxConnections: f.webhookMaxConns}
	if err := limits.Validate(); f.webhookAddr != "" && err != nil {
		return err
	}
	client, err := kubeClient(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg := controller.Config{
		DriverName:        f.driverName,
		Client:            client,
		Namespace:         f.namespace,
		Identity:          f.identity,
		LeaseName:         f.leaseName,
		LeaseDuration:     f.leaseDuration,
		RenewDeadline:     f.renewDeadline,
		RetryPeriod:       f.retryPeriod,
		RecomputeInterval: f.recomputeInterval,
		FleetAccounting:   f.fleetAccounting,
		WebhookLimits:     limits,
	}
	if cfg.MetricsListener, err = net.Listen("tcp", f.metricsAddr); err != nil {
		return fmt.Errorf("--metrics-address: %w", err)
	}
	if f.webhookAddr != "" {
		if cfg.WebhookListener, err = net.Listen("tcp", f.webhookAddr); err != nil {
			return fmt.Errorf("--webhook-address: %w", err)
		}
		if f.certFile != "" {
			cfg.Certificates = &servingcert.FileSource{CertFile: f.certFile, KeyFile: f.keyFile}
		} else {
			svc := f.webhookService + "." + f.namespace + ".svc"
			cfg.Certificates, err = servingcert.NewManager(servingcert.Config{
				Client:                client,
				Namespace:             f.namespace,
				SecretName:            f.certSecret,
				DNSNames:              []string{svc, svc + "." + f.clusterDomain},
				WebhookConfigurations: splitList(f.webhookConfig),
			})
			if err != nil {
				return err
			}
		}
	}
	err = controller.Run(ctx, cfg)
	if errors.Is(err, controller.ErrLostLeadership) {
		logger.Info("Lost the leader lease; exiting so that the next start is clean")
	}
	return err
}

func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = "gpudra-controller"
	cfg.ContentType = controller.ContentType
	cfg.AcceptContentTypes = controller.ContentType + ",application/json"
	return kubernetes.NewForConfig(cfg)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
