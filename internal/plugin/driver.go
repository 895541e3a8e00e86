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
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// Driver is a running kubelet plugin. It owns the plugin's life cycle
// (Start, Stop) and answers the kubelet (claims.go, WatchHealthStatus in
// health.go, HandleError); what it runs it hands to the types that own
// it: the ResourceSlices to the publisher, health to the health tracker,
// the metrics' sampling to telemetry, claims' status to claimStatus.
//
// Its fields are set by Start, before the kubelet can call and before
// any loop starts, and only read after; each type guards its own state.
type Driver struct {
	// cfg is Config with its defaults.
	cfg Config
	// helper is the kubelet plugin library, serving the kubelet.
	helper *kubeletplugin.Helper
	// state is the node state: the prepared claims, the checkpoint, the
	// MIG instances and MPS daemons; it guards itself.
	state *nodestate.State

	// pub owns the ResourceSlices and what they are built from.
	pub *publisher
	// health is the GPUs' and the MPS daemons' health.
	health *healthTracker
	// calls counts the kubelet's calls in flight: background work yields
	// to them (callgate.go).
	calls callGate
	// events records Events on the Node.
	events *nodeEvents

	// endpoints are the sockets and data directory the kubelet reaches
	// the plugin through; healthcheck serves their liveness. Both are
	// set by Start; only read after.
	endpoints   endpoints
	healthcheck *healthServer

	// metrics are the instruments /metrics serves; telemetry samples the
	// devices for them.
	metrics   *Instruments
	telemetry *telemetry
	// status writes prepared claims' status.devices.
	status *claimStatus

	// logger is Start's, for Stop, which has no context.
	logger klog.Logger
	// cancel ends the context of the loops; wg waits for them (and the
	// watches' and republishes' goroutines) at Stop; stopOnce makes
	// stopping twice harmless.
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// The node state declares what it needs of the hardware; a backend that
// drifted from it is a build error here.
var _ nodestate.Hardware = (*backend.Backend)(nil)

// CheckpointFile is the checkpoint's name inside the plugin data dir.
const CheckpointFile = "checkpoint.json"

// MPSDirName is the directory inside the plugin data dir that holds the
// MPS daemons' directories, by default.
const MPSDirName = "mps"

// Start discovers the GPUs, reconciles the node state with the checkpoint,
// starts serving the kubelet and publishes the ResourceSlices.
//
// Start owns cfg.Backend from the moment it is called: when it fails it
// has closed the backend, as it has released everything else it had
// started (one cleanup, the one Stop does, whatever the step that failed);
// when it succeeds, Stop does. The caller never closes the backend itself.
func Start(ctx context.Context, cfg Config) (_ *Driver, err error) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	d := &Driver{
		cfg:     cfg.withDefaults(logger),
		logger:  logger,
		cancel:  cancel,
		metrics: cfg.Instruments,
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.stop())
		}
	}()
	cfg = d.cfg
	d.health = newHealthTracker(cfg.HealthResend)
	if err := cfg.checkFleetConfig(); err != nil {
		return nil, err
	}
	if d.metrics == nil {
		d.metrics = NewInstruments(cfg.NodeName)
	}
	d.status = newClaimStatus(cfg.KubeClient, cfg.DriverName, cfg.NodeName, d.metrics)
	d.status.yield = d.calls.yield

	if err := d.discover(ctx); err != nil {
		return nil, err
	}
	d.pub.probeIMEXOnce(ctx)
	if err := d.openState(ctx); err != nil {
		return nil, err
	}
	d.telemetry = newTelemetry(cfg, d.state, d.pub, d.health, d.metrics)
	d.events = newNodeEvents(ctx, cfg.KubeClient, cfg.NodeName)
	d.pub.events, d.pub.devicePlugin.events = d.events, d.events
	d.pub.reportDomain(ctx, d.pub.currentDomain())
	// Before the first publish: a plugin starting beside NVIDIA's device
	// plugin publishes no GPU at all, not for a moment.
	d.pub.devicePlugin.check(ctx)
	d.pub.slices.start(ctx, &d.wg, d.pub.wakeStepper)
	// Until it has listed the ConfigMap, the node counts as assigned no
	// spares: the first publish keeps what an earlier run published, and
	// adds none.
	d.pub.fleet.watch(ctx, &d.wg)
	if err := d.serveKubelet(ctx); err != nil {
		return nil, err
	}
	d.recordHealthAtStart(ctx)
	// A restarted plugin keeps publishing the MIG placements its earlier
	// runs published: those the checkpoint records (publishLocked adds
	// them), and those the API server still shows (published by a gpudra
	// older than the record); it steps from the slices the API server
	// holds.
	d.pub.setMigReady(d.pub.slices.waitForStoredSlices(ctx, d.Node()))
	if err := d.pub.publish(ctx); err != nil {
		return nil, err
	}
	if err := d.startHealthcheck(ctx); err != nil {
		return nil, err
	}
	d.startLoops(ctx)
	d.metrics.serve(d)
	return d, nil
}

// discover makes the plugin data directory, whose identity the liveness
// check follows, and finds the node's GPUs.
func (d *Driver) discover(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg := d.cfg
	if err := os.MkdirAll(cfg.PluginDataDir, 0o750); err != nil {
		return fmt.Errorf("create plugin data dir: %w", err)
	}
	dataDirID, _, err := statID(cfg.PluginDataDir)
	if err != nil {
		return fmt.Errorf("plugin data dir: %w", err)
	}
	draSocket, regSocket := socketPaths(cfg)
	d.endpoints = endpoints{dataDir: cfg.PluginDataDir, draSocket: draSocket, regSocket: regSocket, dataDirID: dataDirID}

	node, err := cfg.Backend.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover GPUs: %w", err)
	}
	node.Name = cfg.NodeName
	logger.Info("Discovered GPUs", "node", node.Name, "gpus", len(node.GPUs), "driverVersion", node.DriverVersion)
	warnUnknownProfiles(ctx, node, cfg.MigProfiles)
	d.pub = newPublisher(cfg, node, d.health, &d.calls)
	return nil
}

// openState opens the node state on the checkpoint and reconciles it with
// the hardware: what a crash or a reboot left half done is finished or
// rolled back before the kubelet can call.
func (d *Driver) openState(ctx context.Context) error {
	cfg := d.cfg
	cdi, err := cdispec.New(cfg.CDIDir, cfg.DriverName)
	if err != nil {
		return fmt.Errorf("CDI spec dir %s: %w", cfg.CDIDir, err)
	}
	bootID, err := checkpoint.BootID(cfg.BootIDPath)
	if err != nil {
		return fmt.Errorf("read boot ID: %w", err)
	}
	state, err := nodestate.New(nodestate.Options{
		DriverName:   cfg.DriverName,
		Node:         d.pub.currentNode(),
		Hardware:     countingHardware{Hardware: cfg.Backend, m: d.metrics},
		CDI:          cdi,
		Checkpoint:   checkpoint.NewStore(filepath.Join(cfg.PluginDataDir, CheckpointFile)),
		BootID:       bootID,
		Hooks:        cfg.StateHooks,
		MPS:          cfg.MPS,
		MPSDir:       cfg.MPSDir,
		ShareSharing: cfg.ShareSharing,
		// A claim can hold a share of a GPU only while they are published
		// as shareable.
		SharesPublished: d.pub.consumableCapacityActive,
		// IMEX channels of the node's own NVLink domain (docs/nvlink.md).
		NVLinkDomain: d.pub.nvlinkDomain,
		Channels:     cfg.Backend,
		IMEX:         d.pub.imexReadiness(),
	})
	if err != nil {
		return err
	}
	report, err := state.Reconcile(ctx)
	if err != nil {
		// Reconcile did what it could; what is left is logged and the
		// affected claims fail on prepare with a clear error.
		klog.FromContext(ctx).Error(err, "Reconciling node state left problems")
	}
	d.state, d.pub.state = state, state
	d.pub.setAdminInstances(report.AdminInstances)
	return nil
}

// serveKubelet starts the kubelet plugin library: the DRA socket, and
// registration with the kubelet.
func (d *Driver) serveKubelet(ctx context.Context) error {
	cfg := d.cfg
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(cfg.DriverName),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.KubeClient(cfg.KubeClient),
		kubeletplugin.PluginDataDirectoryPath(cfg.PluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistrarDir),
		kubeletplugin.CDIDirectory(cfg.CDIDir),
		// Claims prepare concurrently; the node state serializes what
		// must be serialized (the checkpoint, one claim at a time).
		kubeletplugin.Serialize(false),
		// The names the health checks dial (socketPaths).
		kubeletplugin.PluginSocket(filepath.Base(d.endpoints.draSocket)),
	}
	if cfg.DeviceMetadata {
		opts = append(opts, kubeletplugin.EnableDeviceMetadata(true, []schema.GroupVersion{metadatav1beta1.SchemeGroupVersion}))
	}
	if cfg.RollingUpdateUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(cfg.RollingUpdateUID))
	} else {
		opts = append(opts, kubeletplugin.RegistrarSocketFilename(filepath.Base(d.endpoints.regSocket)))
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	d.helper, d.pub.helper = helper, helper
	return nil
}

// recordHealthAtStart records what the driver still asks for after an XID
// from before this start (a GPU reset, a reboot), so that the first
// publish has it: a restart must not publish a GPU as fit that is not.
func (d *Driver) recordHealthAtStart(ctx context.Context) {
	d.health.atStart = d.cfg.Backend.CurrentHealth(d.pub.currentNode())
	for _, ev := range d.health.atStart {
		klog.FromContext(ctx).Info("GPU is unhealthy at start-up", "uuid", ev.UUID, "reason", ev.Reason)
		d.health.record(ev)
	}
}

// startLoops starts what runs until Stop: the health watch, the writer of
// claims' status.devices, the MIG placements' steps, republishing, the
// watch of the sockets, of the MPS daemons, and telemetry.
func (d *Driver) startLoops(ctx context.Context) {
	watchHealth := func(ctx context.Context) {
		opts := backend.HealthOptions{IgnoredXIDs: d.cfg.IgnoredXIDs, RecheckInterval: d.cfg.HealthRecheck}
		d.health.watch(ctx, d.cfg.Backend, d.Node(), opts, d.pub.publish)
	}
	watchDaemons := func(ctx context.Context) { d.health.watchDaemons(ctx, d.state, d.cfg.MPSCheckInterval) }
	loops := []func(context.Context){watchHealth, watchDaemons, d.status.run, d.pub.stepLoop, d.pub.republishLoop, d.watchFiles, d.pub.watchFabric, d.pub.watchIMEX, d.pub.devicePlugin.watch}
	if d.cfg.TelemetryInterval > 0 {
		loops = append(loops, d.telemetry.loop)
	}
	for _, loop := range loops {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			loop(ctx)
		}()
	}
}

// Stop stops serving, stops publishing (the slices stay, so a restarted
// plugin takes over without the scheduler seeing the GPUs vanish) and
// releases NVML. Stopping twice is harmless.
func (d *Driver) Stop() {
	if err := d.stop(); err != nil {
		d.logger.Error(err, "Stopping the plugin")
	}
}

// stop releases, in the reverse order of Start, what Start got so far:
// it is Stop, and the cleanup of a Start that failed at any step.
func (d *Driver) stop() error {
	var err error
	d.stopOnce.Do(func() {
		d.cancel()
		if d.helper != nil {
			d.helper.Stop()
		}
		if d.healthcheck != nil {
			d.healthcheck.stop()
		}
		d.wg.Wait()
		if d.events != nil {
			d.events.stop()
		}
		if cerr := d.cfg.Backend.Close(); cerr != nil {
			err = fmt.Errorf("close the NVML backend: %w", cerr)
		}
	})
	return err
}

// WholeGPUsOnly reports whether the plugin fell back to publishing whole
// GPUs only because the cluster drops partitionable devices.
func (d *Driver) WholeGPUsOnly() bool { return d.pub.wholeOnly() }

// AdminInstances are the MIG instances found at start-up that gpudra did
// not create, by GPU UUID.
func (d *Driver) AdminInstances() map[string][]gpu.MigInstance { return d.pub.adminInstances() }

// State exposes the node state to in-process tests and tools.
func (d *Driver) State() *nodestate.State { return d.state }

// Node returns the inventory the plugin publishes.
func (d *Driver) Node() gpu.Node { return d.pub.currentNode() }

// HandleError is called by the helper for background errors, e.g. while
// publishing ResourceSlices.
//
// When the API server drops the partitionable-device fields (a cluster
// without DRAPartitionableDevices), the plugin falls back to publishing
// whole GPUs only, which every cluster serves, and says so.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	logger := klog.FromContext(ctx)
	var dropped *resourceslice.DroppedFieldsError
	if errors.As(err, &dropped) {
		features := dropped.DisabledFeatures()
		logger.Error(err, "The API server dropped fields of the published ResourceSlices; enable these features on the cluster", "features", features)
		d.pub.disableFeatures(features)
		if slices.Contains(features, "DRAConsumableCapacity") && d.pub.fallBackToExclusiveGPUs(ctx) {
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				if err := d.pub.publish(ctx); err != nil {
					logger.Error(err, "Republish exclusive GPUs")
				}
			}()
		}
		if slices.Contains(features, "DRAPartitionableDevices") && d.pub.fallBackToWholeGPUs() {
			logger.Info("The cluster does not serve partitionable devices: publishing whole GPUs only, without MIG partitions. Enable the DRAPartitionableDevices feature on the API server and scheduler, then restart the plugin, to get on-demand MIG.")
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				if err := d.pub.publish(ctx); err != nil {
					logger.Error(err, "Republish whole GPUs only")
				}
			}()
		}
	} else {
		logger.Error(err, msg)
	}
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cfg.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}
