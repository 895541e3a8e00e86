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
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/cmdline"
	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/imexready"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/plugin"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	gpudraversion "github.com/gpudra/gpudra/internal/version"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
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
	sparesConfig   string
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
	// Multi-node NVLink.
	imexDaemon        string
	imexSocket        string
	imexCheckInterval time.Duration
	// Beside NVIDIA's device plugin.
	ignoreDevicePlugin        bool
	devicePluginCheckInterval time.Duration
}

// newFlags defines the plugin's flags, their defaults (those of
// plugin.Config where it has one) and the environment variables the chart
// sets them with.
// newFlags defines the plugin's flags, their defaults (those of
// plugin.Config where it has one) and the environment variables the chart
// sets them with, one --help section at a time.
func newFlags() (*flags, *cmdline.Command) {
	f := &flags{}
	cmd := cmdline.New("gpudra-kubelet-plugin")
	f.nodeFlags(cmd)
	f.deviceFlags(cmd)
	f.cdiFlags(cmd)
	f.migFlags(cmd)
	f.sharingFlags(cmd)
	f.healthFlags(cmd)
	f.imexFlags(cmd)
	cmd.Env(chartEnv)
	cmd.Description = description
	return f, cmd
}

// chartEnv are the environment variables the chart sets flags with
// (daemonset.yaml), by flag.
var chartEnv = map[string]string{
	"driver-name":                   "DRIVER_NAME",
	"node-name":                     "NODE_NAME",
	"kubeconfig":                    "KUBECONFIG",
	"device-backend":                "DEVICE_BACKEND",
	"fake-profile":                  "FAKE_PROFILE",
	"fake-state-dir":                "FAKE_STATE_DIR",
	"driver-root":                   "NVIDIA_DRIVER_ROOT",
	"host-driver-root":              "HOST_DRIVER_ROOT",
	"nvidia-cdi-hook-path":          "NVIDIA_CDI_HOOK_PATH",
	"cdi-dir":                       "CDI_DIR",
	"plugin-data-dir":               "PLUGIN_DATA_DIR",
	"registrar-dir":                 "REGISTRAR_DIR",
	"pod-uid":                       "POD_UID",
	"mig-profiles":                  "MIG_PROFILES",
	"mig-spare-gpus":                "MIG_SPARE_GPUS",
	"mig-spares-configmap":          "MIG_SPARES_CONFIGMAP",
	"device-metadata":               "DEVICE_METADATA",
	"healthcheck-port":              "HEALTHCHECK_PORT",
	"namespace":                     "POD_NAMESPACE",
	"consumable-capacity":           "CONSUMABLE_CAPACITY",
	"consumable-capacity-sharing":   "CONSUMABLE_CAPACITY_SHARING",
	"mps-daemon-image":              "MPS_DAEMON_IMAGE",
	"mps-daemon-image-pull-policy":  "MPS_DAEMON_IMAGE_PULL_POLICY",
	"mps-daemon-image-pull-secrets": "MPS_DAEMON_IMAGE_PULL_SECRETS",
	"metrics-address":               "METRICS_ADDRESS",
	"imex-daemon":                   "IMEX_DAEMON",
	"imex-socket":                   "IMEX_SOCKET",
	"ignore-device-plugin":          "IGNORE_DEVICE_PLUGIN",
}

// nodeFlags are the node's and the plugin's identity, and where it talks
// to the kubelet.
func (f *flags) nodeFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.driverName, "driver-name", gpu.DefaultDriverName, "DRA driver name published in ResourceSlices and matched in DeviceClasses.")
	fs.StringVar(&f.nodeName, "node-name", "", "Name of the node this plugin runs on; also the ResourceSlice pool name (required).")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig file; empty means in-cluster config.")
	fs.StringVar(&f.namespace, "namespace", "", "The plugin's namespace, from the downward API: MPS daemon pods run there, and with --mig-spare-gpus=fleet the spares ConfigMap is read there.")
	fs.StringVar(&f.podUID, "pod-uid", "", "UID of the plugin's pod, from the downward API; enables seamless rolling updates.")
	fs.StringVar(&f.pluginDataDir, "plugin-data-dir", "", "Directory for the DRA socket and the checkpoint; default "+kubeletplugin.KubeletPluginsDir+"/<driver-name>. Must be the same path inside and outside the container.")
	fs.StringVar(&f.registrarDir, "registrar-dir", kubeletplugin.KubeletRegistryDir, "The kubelet's plugin registration directory.")
	fs.IntVar(&f.healthPort, "healthcheck-port", 51515, "TCP port of the gRPC health service (grpc.health.v1, services \"liveness\" and \"readiness\") for the kubelet's probes; 0 turns it off.")
	cmd.Section("node", "driver-name", "node-name", "kubeconfig", "namespace", "pod-uid", "plugin-data-dir", "registrar-dir", "healthcheck-port")
}

// deviceFlags say where the GPUs come from, and what the plugin does
// beside NVIDIA's device plugin.
func (f *flags) deviceFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.deviceBackend, "device-backend", "nvml", "Where GPUs come from: nvml (the real driver library) or fake (simulated GPUs, for tests and demos).")
	fs.StringVar(&f.fakeProfile, "fake-profile", "dgx-h100", "With --device-backend=fake: "+strings.Join(nvmlfake.Profiles(), ", ")+", or the path of a profile file (see docs/fake-gpus.md).")
	fs.StringVar(&f.fakeStateDir, "fake-state-dir", "/var/lib/gpudra/fake", "With --device-backend=fake: where the fake GPUs keep their state (MIG instances, health) across plugin restarts.")
	fs.StringVar(&f.driverRoot, "driver-root", "/", "Root of the NVIDIA driver installation on the host: / normally, /run/nvidia/driver with the GPU Operator.")
	fs.StringVar(&f.hostDriverRoot, "host-driver-root", "", "Where --driver-root is on the host, when the plugin sees the driver installation at another path (the chart mounts the host's at /driver-root); the CDI specs name host paths. Empty: the same as --driver-root.")
	fs.BoolVar(&f.deviceMetadata, "device-metadata", true, "Hand each prepared device's attributes (UUID, MIG UUID and profile, NVLink group, PCI bus ID, …) to its containers as a JSON file at /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json (KEP-5304 device metadata, API metadata.resource.k8s.io/v1beta1).")
	fs.BoolVar(&f.ignoreDevicePlugin, "ignore-device-plugin", false, "Publish the node's GPUs even while its Node advertises NVIDIA's device plugin's resources (nvidia.com/gpu, nvidia.com/mig-*): both allocators then hand out the same GPUs. Only where you have made sure they do not (docs/gpu-operator.md).")
	fs.DurationVar(&f.devicePluginCheckInterval, "device-plugin-check-interval", plugin.DefaultDevicePluginCheckInterval, "How often the plugin reads its Node to tell whether NVIDIA's device plugin advertises the node's GPUs; while it does, the plugin publishes none of them.")
	cmd.Section("devices", "device-backend", "fake-profile", "fake-state-dir", "driver-root", "host-driver-root", "device-metadata", "ignore-device-plugin", "device-plugin-check-interval")
}

// cdiFlags say where the CDI specs go and which hook they name.
func (f *flags) cdiFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.cdiDir, "cdi-dir", kubeletplugin.DefaultCDIDir, "Directory for the per-claim CDI specs; must be one the container runtime reads.")
	fs.StringVar(&f.cdiHookPath, "nvidia-cdi-hook-path", backend.DefaultCDIHookPath, "Path on the host of NVIDIA's nvidia-cdi-hook, which the container runtime runs to update each container's ld cache and library links.")
	fs.StringVar(&f.installCDIHook, "install-cdi-hook", "", "Copy the nvidia-cdi-hook shipped beside this binary into this directory and exit (the chart's init container does this with a host directory).")
	cmd.Section("CDI", "cdi-dir", "nvidia-cdi-hook-path", "install-cdi-hook")
}

// migFlags say which MIG partitions are published, and on how many free
// GPUs.
func (f *flags) migFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.migProfiles, "mig-profiles", "all", "MIG profiles to publish: all, none, or a comma-separated list such as 1g.10gb,3g.40gb,7g.80gb; each published placement costs the scheduler on every claim.")
	fs.StringVar(&f.migSpareGPUs, "mig-spare-gpus", strconv.Itoa(slicebuilder.DefaultSpareGPUs), "How many free GPUs of the node publish their MIG placements beside the GPUs already partitioned, refilled as partitions take them: a number from 1, all, or fleet (as many as gpudra-controller assigns the node in --mig-spares-configmap, often none); one claim gets at most the partitions these GPUs hold.")
	fs.StringVar(&f.sparesConfig, "mig-spares-configmap", "gpudra-mig-spares", "With --mig-spare-gpus=fleet: the ConfigMap in --namespace where gpudra-controller assigns nodes their spare GPUs (data: node name → number); the plugin reads its node's entry.")
	cmd.Section("MIG", "mig-profiles", "mig-spare-gpus", "mig-spares-configmap")
}

// sharingFlags say how GPUs are shared between claims, and how MPS
// daemons run.
func (f *flags) sharingFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.BoolVar(&f.consumableCapacity, "consumable-capacity", false, "Publish whole GPUs that several claims share, each taking a share of their memory and multiprocessors (DRAConsumableCapacity).")
	fs.StringVar(&f.shareSharing, "consumable-capacity-sharing", "MPS", "How a claim holding a share of a GPU shares it when its config does not say: MPS (the share is enforced), TimeSlicing or None.")
	fs.StringVar(&f.mpsImage, "mps-daemon-image", "", "Image of the MPS control daemon pods, the plugin's own; empty refuses claims that ask for MPS.")
	fs.StringVar(&f.mpsPullPolicy, "mps-daemon-image-pull-policy", string(v1.PullIfNotPresent), "Pull policy of the MPS control daemon pods.")
	cmd.ListVar(&f.mpsPullSecrets, "mps-daemon-image-pull-secrets", nil, "Image pull secrets of the MPS control daemon pods, the plugin's own (comma-separated).")
	cmd.Section("sharing", "consumable-capacity", "consumable-capacity-sharing", "mps-daemon-image", "mps-daemon-image-pull-policy", "mps-daemon-image-pull-secrets")
}

// healthFlags are the metrics, telemetry and health checks.
func (f *flags) healthFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.metricsAddr, "metrics-address", ":8080", "Address of the HTTP server for /metrics (Prometheus); empty turns it off.")
	fs.DurationVar(&f.telemetry, "telemetry-interval", plugin.DefaultTelemetryInterval, "How often every GPU's utilization, memory, temperature and power is read from NVML for the metrics; 0 turns sampling off.")
	fs.Float64Var(&f.idleThreshold, "idle-threshold", plugin.DefaultIdleThreshold, "Utilization (0-1) below which a device counts as idle.")
	fs.DurationVar(&f.idleAfter, "idle-after", plugin.DefaultIdleAfter, "How long every device of a claim must stay below --idle-threshold for the claim to count as idle (gpudra_claims_idle).")
	fs.UintSliceVar(&f.ignoredXIDs, "ignored-xids", nil, "XIDs that leave a GPU healthy (comma-separated); default: the application XIDs "+xidList(discovery.DefaultIgnoredXIDs)+".")
	fs.DurationVar(&f.healthRecheck, "health-recheck-interval", discovery.DefaultRecheckInterval, "How often an unhealthy GPU is asked whether it recovered (the driver asks for no recovery action, or a lost GPU answers again); its taint goes when it has.")
	cmd.Section("health and metrics", "metrics-address", "telemetry-interval", "idle-threshold", "idle-after", "ignored-xids", "health-recheck-interval")
}

// imexFlags say how a multi-node NVLink node's IMEX daemon is checked.
func (f *flags) imexFlags(cmd *cmdline.Command) {
	fs := cmd.Flags
	fs.StringVar(&f.imexDaemon, "imex-daemon", plugin.IMEXDaemonHost, "On a node in a multi-node NVLink domain (GB200/GB300 trays): how its IMEX daemon is checked. host: ask the operator's nvidia-imex service with the driver root's nvidia-imex-ctl -q --u=<--imex-socket> every --imex-check-interval, publish the answer (imexReady) so that new pods holding an IMEX channel stay off a node whose daemon is not ready, and refuse to prepare a channel until it answers READY; none: ask nothing (you vouch for the daemons). Nodes in no domain ask nothing either way (docs/nvlink.md).")
	fs.StringVar(&f.imexSocket, "imex-socket", imexready.DefaultSocket, "With --imex-daemon=host: the IMEX daemon's control socket, its IMEX_CMD_UNIX_DOMAIN_PATH (the daemon's config must set IMEX_CMD_ENABLED=1 and this path), as the plugin's container sees it.")
	fs.DurationVar(&f.imexCheckInterval, "imex-check-interval", imexready.DefaultInterval, "With --imex-daemon=host: how often the IMEX daemon is asked; a daemon that stops answering keeps new multi-node pods off the node about this long (plus a republish) later.")
	cmd.Section("multi-node NVLink", "imex-daemon", "imex-socket", "imex-check-interval")
}

// usage marks a flag's value that cannot be run with as a bad command
// line: the plugin exits 2 for it, 1 for a failure at run time.
func usage(err error) error { return gpudraversion.UsageError{Err: err} }

// checkFleetSpares says what --mig-spare-gpus=fleet lacks: the ConfigMap
// it reads is in the plugin's namespace.
func checkFleetSpares(f *flags, spare slicebuilder.SpareGPUs) error {
	if !spare.Fleet {
		return nil
	}
	switch {
	case f.namespace == "":
		return fmt.Errorf("--mig-spare-gpus=fleet reads the spares gpudra-controller assigns this node from the ConfigMap %q in the plugin's namespace: set --namespace (env POD_NAMESPACE, from the downward API as the chart does), or choose a number of spares", f.sparesConfig)
	case f.sparesConfig == "":
		return errors.New("--mig-spare-gpus=fleet reads the spares gpudra-controller assigns this node from a ConfigMap: set --mig-spares-configmap (env MIG_SPARES_CONFIGMAP) to its name, gpudra-controller's --mig-spares-configmap")
	}
	return nil
}

// healthcheckAddr listens on every address of the pod, where the kubelet's
// gRPC probe connects; port 0 turns the service off.
func healthcheckAddr(port int) (string, error) {
	switch {
	case port == 0:
		return "", nil
	case port < 0 || port > 65535:
		return "", fmt.Errorf("--healthcheck-port must be a TCP port, or 0 to turn the health service off; got %d", port)
	}
	return fmt.Sprintf(":%d", port), nil
}

// xidList writes XIDs for a flag's help: "13, 31, 43".
func xidList(xids []uint64) string {
	out := make([]string, len(xids))
	for i, x := range xids {
		out[i] = fmt.Sprint(x)
	}
	return strings.Join(out, ", ")
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

// pluginConfig checks the flags and turns them into the plugin's
// configuration; what needs the cluster or the GPUs (the client, the
// backend, MPS, the instruments) run fills in. A bad flag is a usage
// error.
func (f *flags) pluginConfig() (plugin.Config, error) {
	if f.nodeName == "" {
		return plugin.Config{}, usage(errors.New("--node-name (or env NODE_NAME) is required"))
	}
	if f.pluginDataDir == "" {
		f.pluginDataDir = kubeletplugin.KubeletPluginsDir + "/" + f.driverName
	}
	migProfiles, err := slicebuilder.ParseMigProfiles(f.migProfiles)
	if err != nil {
		return plugin.Config{}, usage(fmt.Errorf("--mig-profiles: %w", err))
	}
	spareGPUs, err := slicebuilder.ParseSpareGPUs(f.migSpareGPUs)
	if err != nil {
		return plugin.Config{}, usage(fmt.Errorf("--mig-spare-gpus: %w", err))
	}
	if err := checkFleetSpares(f, spareGPUs); err != nil {
		return plugin.Config{}, usage(err)
	}
	if f.idleThreshold <= 0 || f.idleThreshold > 1 || f.idleAfter <= 0 {
		return plugin.Config{}, usage(fmt.Errorf("--idle-threshold must be in (0, 1] and --idle-after positive, got %v and %v", f.idleThreshold, f.idleAfter))
	}
	if f.telemetry < 0 {
		return plugin.Config{}, usage(fmt.Errorf("--telemetry-interval must not be negative (0 turns sampling off), got %v", f.telemetry))
	}
	healthcheck, err := healthcheckAddr(f.healthPort)
	if err != nil {
		return plugin.Config{}, usage(err)
	}
	if err := plugin.ValidateIMEXDaemon(f.imexDaemon); err != nil {
		return plugin.Config{}, usage(fmt.Errorf("--imex-daemon: %w", err))
	}
	if f.devicePluginCheckInterval <= 0 {
		return plugin.Config{}, fmt.Errorf("--device-plugin-check-interval must be positive, got %v", f.devicePluginCheckInterval)
	}
	if f.imexCheckInterval <= 0 {
		return plugin.Config{}, usage(fmt.Errorf("--imex-check-interval must be positive, got %v", f.imexCheckInterval))
	}
	shareSharing, err := configapi.SharingFromFlag(f.shareSharing)
	if err != nil {
		return plugin.Config{}, usage(fmt.Errorf("--consumable-capacity-sharing: %w", err))
	}
	return plugin.Config{
		DriverName:                f.driverName,
		NodeName:                  f.nodeName,
		PluginDataDir:             f.pluginDataDir,
		RegistrarDir:              f.registrarDir,
		CDIDir:                    f.cdiDir,
		RollingUpdateUID:          types.UID(f.podUID),
		HealthcheckAddr:           healthcheck,
		MigProfiles:               migProfiles,
		SpareGPUs:                 spareGPUs,
		SparesConfigMap:           f.sparesConfig,
		Namespace:                 f.namespace,
		DeviceMetadata:            f.deviceMetadata,
		ConsumableCapacity:        f.consumableCapacity,
		ShareSharing:              shareSharing,
		TelemetryInterval:         f.telemetry,
		IgnoredXIDs:               ignoredXIDs(f.ignoredXIDs),
		HealthRecheck:             f.healthRecheck,
		IdleThreshold:             f.idleThreshold,
		IdleAfter:                 f.idleAfter,
		IMEXDaemon:                f.imexDaemon,
		IMEXSocket:                f.imexSocket,
		IMEXCheckInterval:         f.imexCheckInterval,
		IgnoreDevicePlugin:        f.ignoreDevicePlugin,
		DevicePluginCheckInterval: f.devicePluginCheckInterval,
	}, nil
}
