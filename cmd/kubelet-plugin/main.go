// Command gpudra-kubelet-plugin is gpudra's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares allocated GPUs for pods through
// CDI. Run it as a DaemonSet (see deployments/helm/gpudra).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	baseversion "k8s.io/component-base/version"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/backend"
	"github.com/gpudra/gpudra/pkg/componentmetrics"
	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/mps"
	"github.com/gpudra/gpudra/pkg/mpspod"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
	"github.com/gpudra/gpudra/pkg/plugin"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
	gpudraversion "github.com/gpudra/gpudra/pkg/version"
)

type flags struct {
	driverName     string
	nodeName       string
	kubeconfig     string
	deviceBackend  string
	fakeProfile    string
	fakeStateDir   string
	driverRoot     string
	hostDriverRoot string
	cdiHookPath    string
	installCDIHook string
	cdiDir         string
	pluginDataDir  string
	registrarDir   string
	podUID         string
	healthPort     int
	migProfiles    string
	migSpareGPUs   string
	deviceMetadata bool
	namespace      string
	// Sharing.
	consumableCapacity bool
	shareSharing       string
	mpsImage           string
	mpsPullPolicy      string
	mpsPullSecrets     []string
	// Observability.
	metricsAddr   string
	telemetry     time.Duration
	idleThreshold float64
	idleAfter     time.Duration
	ignoredXIDs   []uint
	healthRecheck time.Duration
	logging       *logsapi.LoggingConfiguration
	featureGate   featuregate.MutableVersionedFeatureGate
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gpudra-kubelet-plugin:", err)
		os.Exit(gpudraversion.ExitCode(err)) // 2: a bad command line
	}
}

func newFlags() (*flags, *pflag.FlagSet) {
	f := &flags{logging: logsapi.NewLoggingConfiguration(), featureGate: featuregate.NewVersionedFeatureGate(version.MustParse(baseversion.DefaultKubeBinaryVersion))}
	if err := logsapi.AddFeatureGates(f.featureGate); err != nil {
		panic(err)
	}
	fs := pflag.NewFlagSet("gpudra-kubelet-plugin", pflag.ContinueOnError)
	fs.StringVar(&f.driverName, "driver-name", envOr("DRIVER_NAME", gpu.DefaultDriverName), "DRA driver name published in ResourceSlices and matched in DeviceClasses (env DRIVER_NAME).")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of the node this plugin runs on; also the ResourceSlice pool name (env NODE_NAME, required).")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig file; empty means in-cluster config (env KUBECONFIG).")
	fs.StringVar(&f.deviceBackend, "device-backend", envOr("DEVICE_BACKEND", "nvml"), "Where GPUs come from: nvml (the real driver library) or fake (simulated GPUs, for tests and demos) (env DEVICE_BACKEND).")
	fs.StringVar(&f.fakeProfile, "fake-profile", envOr("FAKE_PROFILE", "dgx-h100"), "With --device-backend=fake: "+strings.Join(nvmlfake.Profiles(), ", ")+", or the path of a profile file (see docs/fake-gpus.md) (env FAKE_PROFILE).")
	fs.StringVar(&f.fakeStateDir, "fake-state-dir", envOr("FAKE_STATE_DIR", "/var/lib/gpudra/fake"), "With --device-backend=fake: where the fake GPUs keep their state (MIG instances, health) across plugin restarts (env FAKE_STATE_DIR).")
	fs.StringVar(&f.driverRoot, "driver-root", envOr("NVIDIA_DRIVER_ROOT", "/"), "Root of the NVIDIA driver installation on the host: / normally, /run/nvidia/driver with the GPU Operator (env NVIDIA_DRIVER_ROOT).")
	fs.StringVar(&f.hostDriverRoot, "host-driver-root", os.Getenv("HOST_DRIVER_ROOT"), "Where --driver-root is on the host, when the plugin sees the driver installation at another path (the chart mounts the host's at /driver-root); the CDI specs name host paths. Empty: the same as --driver-root (env HOST_DRIVER_ROOT).")
	fs.StringVar(&f.cdiHookPath, "nvidia-cdi-hook-path", envOr("NVIDIA_CDI_HOOK_PATH", backend.DefaultCDIHookPath), "Path on the host of NVIDIA's nvidia-cdi-hook, which the container runtime runs to update each container's ld cache and library links (env NVIDIA_CDI_HOOK_PATH).")
	fs.StringVar(&f.installCDIHook, "install-cdi-hook", "", "Copy the nvidia-cdi-hook shipped beside this binary into this directory and exit (the chart's init container does this with a host directory).")
	fs.StringVar(&f.cdiDir, "cdi-dir", envOr("CDI_DIR", kubeletplugin.DefaultCDIDir), "Directory for the per-claim CDI specs; must be one the container runtime reads (env CDI_DIR).")
	fs.StringVar(&f.pluginDataDir, "plugin-data-dir", os.Getenv("PLUGIN_DATA_DIR"), "Directory for the DRA socket and the checkpoint; default /var/lib/kubelet/plugins/<driver-name>. Must be the same path inside and outside the container (env PLUGIN_DATA_DIR).")
	fs.StringVar(&f.registrarDir, "registrar-dir", envOr("REGISTRAR_DIR", kubeletplugin.KubeletRegistryDir), "The kubelet's plugin registration directory (env REGISTRAR_DIR).")
	fs.StringVar(&f.podUID, "pod-uid", os.Getenv("POD_UID"), "UID of the plugin's pod, from the downward API; enables seamless rolling updates (env POD_UID).")
	fs.StringVar(&f.migProfiles, "mig-profiles", envOr("MIG_PROFILES", "all"), "MIG profiles to publish: all, none, or a comma-separated list such as 1g.10gb,3g.40gb,7g.80gb; each published placement costs the scheduler on every claim (env MIG_PROFILES).")
	fs.StringVar(&f.migSpareGPUs, "mig-spare-gpus", envOr("MIG_SPARE_GPUS", strconv.Itoa(slicebuilder.DefaultSpareGPUs)), "How many free GPUs of the node publish their MIG placements beside the GPUs already partitioned, refilled as partitions take them: a number from 1, or all; one claim gets at most the partitions these GPUs hold (env MIG_SPARE_GPUS).")
	fs.BoolVar(&f.deviceMetadata, "device-metadata", envOr("DEVICE_METADATA", "true") == "true", "Hand each prepared device's attributes (UUID, MIG UUID and profile, NVLink group, PCI bus ID, …) to its containers as a JSON file at /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json (KEP-5304 device metadata, API metadata.resource.k8s.io/v1beta1) (env DEVICE_METADATA).")
	fs.IntVar(&f.healthPort, "healthcheck-port", envInt("HEALTHCHECK_PORT", 51515), "TCP port of the gRPC health service (grpc.health.v1, services \"liveness\" and \"readiness\") for the kubelet's probes; -1 turns it off (env HEALTHCHECK_PORT).")
	fs.StringVar(&f.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "The plugin's namespace, from the downward API: MPS daemon pods run there (env POD_NAMESPACE).")
	fs.BoolVar(&f.consumableCapacity, "consumable-capacity", envBool("CONSUMABLE_CAPACITY"), "Publish whole GPUs that several claims share, each taking a share of their memory and multiprocessors (DRAConsumableCapacity) (env CONSUMABLE_CAPACITY).")
	fs.StringVar(&f.shareSharing, "consumable-capacity-sharing", envOr("CONSUMABLE_CAPACITY_SHARING", "MPS"), "How a claim holding a share of a GPU shares it when its config does not say: MPS (the share is enforced), TimeSlicing or None (env CONSUMABLE_CAPACITY_SHARING).")
	fs.StringVar(&f.mpsImage, "mps-daemon-image", os.Getenv("MPS_DAEMON_IMAGE"), "Image of the MPS control daemon pods, the plugin's own; empty refuses claims that ask for MPS (env MPS_DAEMON_IMAGE).")
	fs.StringVar(&f.mpsPullPolicy, "mps-daemon-image-pull-policy", envOr("MPS_DAEMON_IMAGE_PULL_POLICY", string(v1.PullIfNotPresent)), "Pull policy of the MPS control daemon pods (env MPS_DAEMON_IMAGE_PULL_POLICY).")
	fs.StringSliceVar(&f.mpsPullSecrets, "mps-daemon-image-pull-secrets", splitList(os.Getenv("MPS_DAEMON_IMAGE_PULL_SECRETS")), "Image pull secrets of the MPS control daemon pods, the plugin's own (env MPS_DAEMON_IMAGE_PULL_SECRETS, comma-separated).")
	fs.StringVar(&f.metricsAddr, "metrics-address", envOr("METRICS_ADDRESS", ":8080"), "Address of the HTTP server for /metrics (Prometheus); empty turns it off (env METRICS_ADDRESS).")
	fs.DurationVar(&f.telemetry, "telemetry-interval", 10*time.Second, "How often every GPU's utilization, memory, temperature and power is read from NVML for the metrics; 0 turns sampling off.")
	fs.Float64Var(&f.idleThreshold, "idle-threshold", 0.05, "Utilization (0-1) below which a device counts as idle.")
	fs.DurationVar(&f.idleAfter, "idle-after", 30*time.Minute, "How long every device of a claim must stay below --idle-threshold for the claim to count as idle (gpudra_claims_idle).")
	fs.UintSliceVar(&f.ignoredXIDs, "ignored-xids", nil, "XIDs that leave a GPU healthy (comma-separated); default: the application XIDs 13, 31, 43, 45, 68, 109.")
	fs.DurationVar(&f.healthRecheck, "health-recheck-interval", 30*time.Second, "How often an unhealthy GPU is asked whether it recovered (the driver asks for no recovery action, or a lost GPU answers again); its taint goes when it has.")
	logsapi.AddFlags(f.logging, fs)
	f.featureGate.AddFlag(fs) // --feature-gates=Name=true,... (chart value featureGates)
	return f, fs
}

func run() error {
	f, fs := newFlags()
	if done, err := gpudraversion.ParseFlags(fs, os.Args[1:], "gpudra-kubelet-plugin", os.Stdout); done {
		return err // --help, --version, or a bad command line
	}
	if err := logsapi.ValidateAndApply(f.logging, f.featureGate); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	defer logs.FlushLogs()
	if f.installCDIHook != "" {
		return installCDIHook(f.installCDIHook)
	}
	if f.nodeName == "" {
		return errors.New("--node-name (or env NODE_NAME) is required")
	}
	if f.pluginDataDir == "" {
		f.pluginDataDir = kubeletplugin.KubeletPluginsDir + "/" + f.driverName
	}
	migProfiles, err := slicebuilder.ParseMigProfiles(f.migProfiles)
	if err != nil {
		return fmt.Errorf("--mig-profiles: %w", err)
	}
	spareGPUs, err := slicebuilder.ParseSpareGPUs(f.migSpareGPUs)
	if err != nil {
		return fmt.Errorf("--mig-spare-gpus: %w", err)
	}
	if f.idleThreshold <= 0 || f.idleThreshold > 1 || f.idleAfter <= 0 {
		return fmt.Errorf("--idle-threshold must be in (0, 1] and --idle-after positive, got %v and %v", f.idleThreshold, f.idleAfter)
	}
	telemetry := f.telemetry
	if telemetry == 0 {
		telemetry = -1 // plugin.Config: negative turns sampling off
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	logger := klog.LoggerWithValues(klog.Background(), "node", f.nodeName)
	ctx = klog.NewContext(ctx, logger)

	// /metrics answers from here on: not ready until the plugin has
	// started, so that a start-up that hangs or fails shows in
	// gpudra_plugin_ready (and one that crash-loops in the scrape's up).
	instruments := plugin.NewInstruments(f.nodeName)
	if f.metricsAddr != "" {
		srv, err := serveMetrics(f.metricsAddr, instruments.Registry())
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
	}

	client, err := kubeClient(f.kubeconfig)
	if err != nil {
		return err
	}
	be, err := backend.Open(ctx, backend.Options{
		Kind:           f.deviceBackend,
		NodeName:       f.nodeName,
		FakeProfile:    f.fakeProfile,
		FakeStateDir:   f.fakeStateDir,
		DriverRoot:     f.driverRoot,
		HostDriverRoot: f.hostDriverRoot,
		CDIHookPath:    f.cdiHookPath,
	})
	if err != nil {
		return fmt.Errorf("--device-backend=%s (with --fake-profile, --fake-state-dir or --driver-root): %w", f.deviceBackend, err)
	}
	shareSharing, err := configapi.SharingFromFlag(f.shareSharing)
	if err != nil {
		_ = be.Close()
		return fmt.Errorf("--consumable-capacity-sharing: %w", err)
	}
	launcher, err := mpsLauncher(ctx, f, client)
	if err != nil {
		_ = be.Close()
		return err
	}
	var fatal error
	driver, err := plugin.Start(ctx, plugin.Config{
		DriverName:         f.driverName,
		NodeName:           f.nodeName,
		KubeClient:         client,
		Backend:            be,
		PluginDataDir:      f.pluginDataDir,
		RegistrarDir:       f.registrarDir,
		CDIDir:             f.cdiDir,
		RollingUpdateUID:   types.UID(f.podUID),
		HealthcheckAddr:    healthcheckAddr(f.healthPort),
		MigProfiles:        migProfiles,
		SpareGPUs:          spareGPUs,
		DeviceMetadata:     f.deviceMetadata,
		ConsumableCapacity: f.consumableCapacity,
		ShareSharing:       shareSharing,
		MPS:                launcher,
		TelemetryInterval:  telemetry,
		IgnoredXIDs:        ignoredXIDs(f.ignoredXIDs),
		HealthRecheck:      f.healthRecheck,
		IdleThreshold:      f.idleThreshold,
		IdleAfter:          f.idleAfter,
		Instruments:        instruments,
		Fatal: func(err error) {
			fatal = err
			cancel()
		},
	})
	if err != nil {
		_ = be.Close()
		return err
	}
	logger.Info("gpudra kubelet plugin running", "driver", f.driverName, "backend", f.deviceBackend)
	<-ctx.Done()
	// Stop removes the sockets, so the kubelet stops calling a dead plugin.
	driver.Stop()
	return fatal
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
	cfg.UserAgent = "gpudra-kubelet-plugin"
	return kubernetes.NewForConfig(cfg)
}

// healthcheckAddr listens on every address of the pod, where the kubelet's
// gRPC probe connects; a negative port turns the service off.
func healthcheckAddr(port int) string {
	if port < 0 {
		return ""
	}
	return fmt.Sprintf(":%d", port)
}

// envInt is the integer in the environment variable key, or def when it is
// unset or not a number.
func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

// mpsLauncher runs MPS daemons as pods on this node, or returns nil (MPS
// refused) when the plugin does not know its image or namespace.
func mpsLauncher(ctx context.Context, f *flags, client kubernetes.Interface) (mps.Launcher, error) {
	if f.mpsImage == "" || f.namespace == "" {
		klog.FromContext(ctx).Info("MPS is not available: --mps-daemon-image and --namespace are needed to run MPS daemon pods")
		return nil, nil
	}
	l, err := mpspod.New(mpspod.Config{
		Client:            client,
		Namespace:         f.namespace,
		NodeName:          f.nodeName,
		DriverName:        f.driverName,
		Image:             f.mpsImage,
		PullPolicy:        v1.PullPolicy(f.mpsPullPolicy),
		ImagePullSecrets:  f.mpsPullSecrets,
		PriorityClassName: "system-node-critical",
		// Empty means the driver root is at the same path on the host.
		HostDriverRoot: cmp.Or(f.hostDriverRoot, f.driverRoot),
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func envBool(key string) bool {
	v, _ := strconv.ParseBool(os.Getenv(key))
	return v
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// serveMetrics serves /metrics on addr until the returned server is closed.
func serveMetrics(addr string, reg *prometheus.Registry) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", componentmetrics.Handler("kubelet-plugin", reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// ignoredXIDs converts --ignored-xids; nil keeps the plugin's default.
func ignoredXIDs(flag []uint) []uint64 {
	if flag == nil {
		return nil
	}
	out := make([]uint64, len(flag))
	for i, x := range flag {
		out[i] = uint64(x)
	}
	return out
}
