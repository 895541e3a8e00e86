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
	"slices"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// healthTracker owns what the plugin knows of its devices' health: the
// GPUs' health as the backend's events report it (XIDs), and the MPS
// daemons that do not answer (sharing.go). Publishing reads the GPUs'
// health to taint them; the kubelet's health streams (WatchHealthStatus)
// read both, and wake on every change.
type healthTracker struct {
	// resend is Config.HealthResend: a report is stale after twice that.
	resend time.Duration
	// atStart are the GPUs found unhealthy before the first publish; the
	// health watch starts from them. Start writes it before any loop
	// starts; only read after.
	atStart []gpu.HealthEvent

	// mu guards byGPU, changed and daemonTrouble.
	mu sync.Mutex
	// byGPU is the health by GPU UUID; absent = healthy.
	byGPU map[string]gpu.HealthEvent
	// changed is closed and replaced on every change of byGPU or
	// daemonTrouble, waking WatchHealthStatus streams.
	changed chan struct{}
	// daemonTrouble says, by device name, why the device's MPS daemon
	// does not answer; such devices are reported unhealthy.
	daemonTrouble map[string]string
}

func newHealthTracker(resend time.Duration) *healthTracker {
	return &healthTracker{
		resend:        resend,
		byGPU:         map[string]gpu.HealthEvent{},
		changed:       make(chan struct{}),
		daemonTrouble: map[string]string{},
	}
}

// watch follows the backend's health events on node's GPUs until ctx
// ends: each change taints or untaints the device in the ResourceSlices
// (publish, one API write) and wakes the kubelet's health streams.
func (h *healthTracker) watch(ctx context.Context, b *backend.Backend, node gpu.Node, opts backend.HealthOptions, publish func(context.Context) error) {
	logger := klog.FromContext(ctx)
	events := make(chan gpu.HealthEvent)
	done := make(chan struct{})
	opts.Unhealthy = h.atStart
	go func() {
		defer close(done)
		if err := b.WatchHealth(ctx, node, opts, events); err != nil {
			logger.Error(err, "Device health monitoring stopped; health is no longer reported")
		}
	}()
	for {
		select {
		case <-ctx.Done():
			// Wait for the watcher: Stop closes NVML after this returns.
			<-done
			return
		case ev := <-events:
			if !h.record(ev) {
				continue
			}
			logger.Info("GPU health changed", "uuid", ev.UUID, "health", ev.Health, "reason", ev.Reason)
			if err := publish(ctx); err != nil {
				logger.Error(err, "Republish after health change")
			}
		}
	}
}

// record stores the event and reports whether anything changed.
func (h *healthTracker) record(ev gpu.HealthEvent) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, had := h.byGPU[ev.UUID]
	if ev.Health == gpu.Healthy {
		if !had {
			return false
		}
		delete(h.byGPU, ev.UUID)
	} else {
		if had && old.Health == ev.Health && old.Reason == ev.Reason {
			return false
		}
		h.byGPU[ev.UUID] = ev
	}
	h.wakeLocked()
	return true
}

// wakeLocked wakes the health streams. The caller holds h.mu.
func (h *healthTracker) wakeLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// gpuHealth is the health of the GPUs that are not healthy, by UUID:
// what a publish taints.
func (h *healthTracker) gpuHealth() map[string]gpu.Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	health := make(map[string]gpu.Health, len(h.byGPU))
	for uuid, ev := range h.byGPU {
		health[uuid] = ev.Health
	}
	return health
}

// unhealthyGPUs says, by UUID, which GPUs are reported unhealthy (not
// merely unknown).
func (h *healthTracker) unhealthyGPUs() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	unhealthy := map[string]bool{}
	for uuid, ev := range h.byGPU {
		unhealthy[uuid] = ev.Health == gpu.Unhealthy
	}
	return unhealthy
}

// unhealthyCount is the number of GPUs reported unhealthy.
func (h *healthTracker) unhealthyCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.byGPU {
		if ev.Health == gpu.Unhealthy {
			n++
		}
	}
	return n
}

// report is the current health of every GPU of node, and of every MIG
// partition and monitoring device prepared on it (they are as healthy as
// their GPU: the kubelet shows a pod the health of the devices it was
// given) in claims, and of the MIG devices that run one of daemons; with
// the channel that is closed on the next change.
func (h *healthTracker) report(node gpu.Node, claims []checkpoint.Claim, daemons map[string]checkpoint.MPSDaemon) (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	// Prepared devices other than whole GPUs (MIG partitions, monitoring
	// devices), by their GPU's UUID.
	migs := map[string][]string{}
	for _, c := range claims {
		for _, dev := range c.Devices {
			if p, ok := gpu.ParseDeviceName(dev.Device); ok && (p.MIG || p.Monitor) && !slices.Contains(migs[dev.GPUUUID], dev.Device) {
				migs[dev.GPUUUID] = append(migs[dev.GPUUUID], dev.Device)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	report := kubeletplugin.DeviceHealthReport{}
	for _, g := range node.GPUs {
		dh := h.deviceHealth(node.Name, g.DeviceName(), now)
		if ev, ok := h.byGPU[g.UUID]; ok {
			dh.Message = ev.Reason
			switch ev.Health {
			case gpu.Unhealthy:
				dh.Health = kubeletplugin.HealthStatusUnhealthy
			default:
				dh.Health = kubeletplugin.HealthStatusUnknown
			}
		}
		h.daemonHealthLocked(&dh)
		report.Devices = append(report.Devices, dh)
		names := migs[g.UUID]
		slices.Sort(names)
		for _, name := range names {
			mig := dh
			mig.DeviceName = name
			report.Devices = append(report.Devices, mig)
		}
	}
	report.Devices = append(report.Devices, h.migDaemonHealthLocked(node, daemons, now)...)
	return report, h.changed
}

// deviceHealth is a healthy device's entry in a report.
func (h *healthTracker) deviceHealth(pool, device string, now time.Time) kubeletplugin.DeviceHealth {
	return kubeletplugin.DeviceHealth{
		PoolName:           pool,
		DeviceName:         device,
		Health:             kubeletplugin.HealthStatusHealthy,
		LastUpdated:        now,
		HealthCheckTimeout: 2 * h.resend,
	}
}

// WatchHealthStatus streams device health to the kubelet (KEP-4680): a full
// report at once, then on every change and every HealthResend. It waits
// on a change as well as the time, which none of the wait package's loops
// do: hence the select.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	ticker := time.NewTicker(d.cfg.HealthResend)
	defer ticker.Stop()
	for {
		// The node state has its own lock; it is read before the
		// tracker's.
		report, changed := d.health.report(d.Node(), d.state.Claims(), d.state.MPSDaemons())
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-ticker.C:
		}
	}
}
