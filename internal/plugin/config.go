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

package plugin

import (
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Config is everything the plugin needs; cmd/kubelet-plugin fills it from
// flags, tests from temp dirs.
type Config struct {
	DriverName string
	NodeName   string
	KubeClient kubernetes.Interface
	// Backend is the opened NVML layer. Start owns it: it closes it when
	// it fails, Stop when it succeeded; the caller never does.
	Backend *backend.Backend
	// PluginDataDir holds the DRA socket and the checkpoint. It must have
	// the same path inside and outside the plugin's container.
	PluginDataDir string
	// RegistrarDir is where the kubelet looks for plugin registration
	// sockets.
	RegistrarDir string
	// CDIDir is where CDI specs are written (the container runtime's CDI
	// spec dir, normally the tmpfs /var/run/cdi).
	CDIDir string
	// BootIDPath is read to tell a reboot; empty means the kernel's.
	BootIDPath string
	// RollingUpdateUID, when set (the plugin pod's UID), lets two plugin
	// pods run side by side during a DaemonSet rolling update.
	RollingUpdateUID types.UID
	// HealthResend is how often an unchanged health report is re-sent to the
	// kubelet, which treats reports older than 30s as unknown (0:
	// DefaultHealthResend).
	HealthResend time.Duration
	// IgnoredXIDs are XIDs that leave a GPU healthy (nil: the default
	// list of application XIDs, discovery.DefaultIgnoredXIDs);
	// HealthRecheck is how often an unhealthy GPU is asked whether it
	// recovered (0: discovery.DefaultRecheckInterval).
	IgnoredXIDs   []uint64
	HealthRecheck time.Duration
	// HealthcheckAddr is the TCP address of the gRPC health service
	// (grpc.health.v1: services "liveness" and "readiness"), e.g. ":51515";
	// empty turns it off.
	HealthcheckAddr string
	// FileWatchInterval is how often the sockets and the data directory are
	// checked (0: 5s); the plugin exits when they are gone.
	FileWatchInterval time.Duration
	// FabricRefreshInterval is how often the GPUs' NVLink fabric is read
	// again (0: 10s; fabric.go).
	FabricRefreshInterval time.Duration
	// IMEXDaemon is how the node's IMEX daemon is checked (imex.go):
	// IMEXDaemonHost (ask it with nvidia-imex-ctl -q at IMEXSocket every
	// IMEXCheckInterval, 0: 5s) or IMEXDaemonNone (ask nothing; "" is
	// none).
	IMEXDaemon        string
	IMEXSocket        string
	IMEXCheckInterval time.Duration
	// IMEXQueryTimeout bounds one query of the daemon (0: 3s); tests
	// whose nvidia-imex-ctl is a slow-starting test binary raise it.
	IMEXQueryTimeout time.Duration
	// DeviceMetadata hands each prepared device's attributes to its
	// containers (KEP-5304, the DRA device metadata "downward API"): the
	// kubelet plugin library writes them, and mounts them at
	// /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json.
	DeviceMetadata bool
	// MigProfiles selects the MIG profiles published (the zero value: all).
	MigProfiles slicebuilder.MigProfiles
	// SpareGPUs is how many free GPUs publish their MIG placements beside
	// the partitioned ones (the zero value: slicebuilder.DefaultSpareGPUs).
	// In fleet mode the number is gpudra-controller's, read from the
	// ConfigMap SparesConfigMap in Namespace (spares.go); Start fails
	// without them.
	SpareGPUs       slicebuilder.SpareGPUs
	SparesConfigMap string
	// Namespace is the plugin's own (the downward API's): where the
	// spares ConfigMap is read in fleet mode.
	Namespace string
	// StateHooks inject faults into the node state in tests.
	StateHooks nodestate.Hooks
	// ConsumableCapacity publishes whole GPUs that several claims share,
	// each taking a share of their memory and multiprocessors (chart
	// value consumableCapacity.enabled); see docs/sharing.md.
	ConsumableCapacity bool
	// ShareSharing is how a claim that holds a share of a GPU shares it
	// when its config does not say (the node pool's tier); nil: not at
	// all.
	ShareSharing *configapi.Sharing
	// MPS runs the MPS control daemons: the pod launcher on a cluster,
	// a process launcher in-process. Nil refuses claims that ask for MPS.
	MPS mps.Launcher
	// MPSDir holds the daemons' directories; empty means <PluginDataDir>/mps.
	MPSDir string
	// MPSCheckInterval is how often running MPS daemons are checked (0:
	// DefaultMPSCheckInterval).
	MPSCheckInterval time.Duration
	// TelemetryInterval is how often every device's use is read from
	// NVML for the metrics; 0 turns sampling off (gpudra-kubelet-plugin's
	// default is DefaultTelemetryInterval).
	TelemetryInterval time.Duration
	// IdleThreshold (a utilization, 0-1) and IdleAfter say when a claim
	// counts as idle: all its devices below the threshold for that long
	// (0: DefaultIdleThreshold and DefaultIdleAfter).
	IdleThreshold float64
	IdleAfter     time.Duration
	// Instruments are the metrics /metrics serves; nil makes new ones.
	// Made before Start (NewInstruments), they answer while the plugin
	// starts: not ready, counters at 0.
	Instruments *Instruments
	// IgnoreDevicePlugin publishes the GPUs even while the Node
	// advertises NVIDIA's device plugin's resources (deviceplugin.go), and
	// stops checking; DevicePluginCheckInterval is how often the Node is
	// read (0: DefaultDevicePluginCheckInterval).
	IgnoreDevicePlugin        bool
	DevicePluginCheckInterval time.Duration
	// Fatal is called for errors the plugin cannot recover from (the
	// caller typically cancels its main context and exits).
	Fatal func(error)
}

// The defaults of Config's fields, which gpudra-kubelet-plugin's flags
// show and use too.
const (
	DefaultHealthResend      = 15 * time.Second
	DefaultMPSCheckInterval  = 5 * time.Second
	DefaultTelemetryInterval = 10 * time.Second
	DefaultIdleThreshold     = 0.05
	DefaultIdleAfter         = 30 * time.Minute
)

// withDefaults gives the fields left zero their defaults.
func (cfg Config) withDefaults(logger klog.Logger) Config {
	if cfg.HealthResend == 0 {
		cfg.HealthResend = DefaultHealthResend
	}
	if cfg.Fatal == nil {
		cfg.Fatal = func(err error) { logger.Error(err, "Fatal error") }
	}
	if cfg.FileWatchInterval == 0 {
		cfg.FileWatchInterval = fileWatchInterval
	}
	if cfg.FabricRefreshInterval == 0 {
		cfg.FabricRefreshInterval = fabricRefreshInterval
	}
	if cfg.IdleThreshold == 0 {
		cfg.IdleThreshold = DefaultIdleThreshold
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.DevicePluginCheckInterval == 0 {
		cfg.DevicePluginCheckInterval = DefaultDevicePluginCheckInterval
	}
	if cfg.MPSDir == "" {
		cfg.MPSDir = filepath.Join(cfg.PluginDataDir, MPSDirName)
	}
	return cfg
}
