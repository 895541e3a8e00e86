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
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/gpu"
)

// watchHealth follows the backend's health events: each change taints or
// untaints the device in the ResourceSlices (one API write) and wakes the
// kubelet's health streams.
func (d *Driver) watchHealth(ctx context.Context) {
	logger := klog.FromContext(ctx)
	events := make(chan gpu.HealthEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		opts := backend.HealthOptions{IgnoredXIDs: d.cfg.IgnoredXIDs, RecheckInterval: d.cfg.HealthRecheck, Unhealthy: d.unhealthyAtStart}
		if err := d.cfg.Backend.WatchHealth(ctx, d.node, opts, events); err != nil {
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
			if !d.recordHealth(ev) {
				continue
			}
			logger.Info("GPU health changed", "uuid", ev.UUID, "health", ev.Health, "reason", ev.Reason)
			if err := d.publish(ctx); err != nil {
				logger.Error(err, "Republish after health change")
			}
		}
	}
}

// recordHealth stores the event and reports whether anything changed.
func (d *Driver) recordHealth(ev gpu.HealthEvent) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.health[ev.UUID]
	if ev.Health == gpu.Healthy {
		if !had {
			return false
		}
		delete(d.health, ev.UUID)
	} else {
		if had && old.Health == ev.Health && old.Reason == ev.Reason {
			return false
		}
		d.health[ev.UUID] = ev
	}
	close(d.healthChanged)
	d.healthChanged = make(chan struct{})
	return true
}

// healthReport is the current health of every GPU, and of every MIG
// partition and monitoring device prepared on it (they are as healthy as
// their GPU: the kubelet shows a pod the health of the devices it was
// given).
func (d *Driver) healthReport() (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	// The node state has its own lock; read it before taking d.mu.
	// Prepared devices other than whole GPUs (MIG partitions, monitoring
	// devices), by their GPU's UUID.
	migs := map[string][]string{}
	for _, c := range d.state.Claims() {
		for _, dev := range c.Devices {
			if p, ok := gpu.ParseDeviceName(dev.Device); ok && (p.MIG || p.Monitor) && !slices.Contains(migs[dev.GPUUUID], dev.Device) {
				migs[dev.GPUUUID] = append(migs[dev.GPUUUID], dev.Device)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	report := kubeletplugin.DeviceHealthReport{}
	for _, g := range d.node.GPUs {
		dh := kubeletplugin.DeviceHealth{
			PoolName:           d.node.Name,
			DeviceName:         g.DeviceName(),
			Health:             kubeletplugin.HealthStatusHealthy,
			LastUpdated:        now,
			HealthCheckTimeout: 2 * d.cfg.HealthResend,
		}
		if ev, ok := d.health[g.UUID]; ok {
			dh.Message = ev.Reason
			switch ev.Health {
			case gpu.Unhealthy:
				dh.Health = kubeletplugin.HealthStatusUnhealthy
			default:
				dh.Health = kubeletplugin.HealthStatusUnknown
			}
		}
		d.daemonHealthLocked(&dh)
		report.Devices = append(report.Devices, dh)
		names := migs[g.UUID]
		slices.Sort(names)
		for _, name := range names {
			mig := dh
			mig.DeviceName = name
			report.Devices = append(report.Devices, mig)
		}
	}
	report.Devices = append(report.Devices, d.migDaemonHealthLocked(now)...)
	return report, d.healthChanged
}

// WatchHealthStatus streams device health to the kubelet (KEP-4680): a full
// report at once, then on every change and every HealthResend. It waits
// on a change as well as the time, which none of the wait package's loops
// do: hence the select.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	ticker := time.NewTicker(d.cfg.HealthResend)
	defer ticker.Stop()
	for {
		report, changed := d.healthReport()
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

// unhealthyCount is the number of GPUs reported unhealthy.
func (d *Driver) unhealthyCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ev := range d.health {
		if ev.Health == gpu.Unhealthy {
			n++
		}
	}
	return n
}
