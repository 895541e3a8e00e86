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
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

var (
	descPreparedClaims  = MetricPreparedClaims.Desc()
	descPreparedDevices = MetricPreparedDevices.Desc()
	descUnhealthy       = MetricUnhealthyDevices.Desc()
	descMPSDaemons      = MetricMPSDaemons.Desc()
	descReady           = MetricReady.Desc()
	descUtilization     = MetricDeviceUtilization.Desc()
	descMemUtil         = MetricDeviceMemUtil.Desc()
	descMemUsed         = MetricDeviceMemoryUsed.Desc()
	descMemTotal        = MetricDeviceMemoryTotal.Desc()
	descTemperature     = MetricDeviceTemperature.Desc()
	descPower           = MetricDevicePower.Desc()
	descClaimIdle       = MetricClaimIdleSeconds.Desc()
	descClaimsIdle      = MetricClaimsIdle.Desc()
	descDeviceInfo      = MetricDeviceInfo.Desc()
	descSparesAssigned  = MetricMigSparesAssigned.Desc()
	descNoDomain        = MetricNVLinkDomainUnavailable.Desc()
	descDevicePlugin    = MetricDevicePluginConflict.Desc()
)

// deviceCollector exports the node state and the last sampling pass of
// the started driver; until it has started, only that it is not ready.
type deviceCollector struct {
	// d is the started driver: Start stores it (Instruments.serve) once
	// it has started; Collect loads it.
	d atomic.Pointer[Driver]
}

func (c *deviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{descPreparedClaims, descPreparedDevices, descUnhealthy, descMPSDaemons, descReady,
		descUtilization, descMemUtil, descMemUsed, descMemTotal, descTemperature, descPower, descClaimIdle, descClaimsIdle,
		descDeviceInfo, descSparesAssigned, descNoDomain, descDevicePlugin} {
		ch <- desc
	}
}

// gauge sends one gauge sample of the collector.
type gauge func(desc *prometheus.Desc, v float64, labels ...string)

func (c *deviceCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	d := c.d.Load()
	if d == nil {
		g(descReady, 0)
		return
	}
	for _, info := range d.telemetry.deviceInfo() {
		g(descDeviceInfo, 1, info.labels()...)
	}
	collectPrepared(g, d.state.Claims())
	collectNode(g, d)
	if snap := d.telemetry.last.Load(); snap != nil {
		collectSamples(g, snap)
	}
}

// collectPrepared exports the prepared claims, and their devices by type
// and access.
func collectPrepared(g gauge, claims []checkpoint.Claim) {
	prepared := 0
	devices := map[[2]string]int{
		{"gpu", "exclusive"}: 0, {"mig", "exclusive"}: 0, {"gpu", "admin"}: 0, {"mig", "admin"}: 0,
	}
	for _, cl := range claims {
		if cl.State != checkpoint.PrepareCompleted {
			continue
		}
		prepared++
		for _, dev := range cl.Devices {
			typ, access := "gpu", "exclusive"
			switch {
			case dev.Mig != nil:
				typ = "mig"
			case dev.Channel != nil:
				typ = slicebuilder.TypeIMEXChannel
			}
			if dev.AdminAccess {
				access = "admin"
			}
			devices[[2]string{typ, access}]++
		}
	}
	g(descPreparedClaims, float64(prepared))
	for k, n := range devices {
		g(descPreparedDevices, float64(n), k[0], k[1])
	}
}

// collectNode exports the node's state: unhealthy GPUs, the device plugin
// conflict, the MPS daemons, readiness, the spares assigned and why the
// node is in no NVLink domain.
func collectNode(g gauge, d *Driver) {
	g(descUnhealthy, float64(d.health.unhealthyCount()))
	g(descDevicePlugin, boolGauge(d.pub.devicePlugin.resources() != nil))
	running, unhealthy := d.health.mpsDaemonStates(d.state.MPSDaemons())
	g(descMPSDaemons, float64(running), "running")
	g(descMPSDaemons, float64(unhealthy), "unhealthy")
	g(descReady, boolGauge(d.Ready() == nil))
	if d.cfg.SpareGPUs.Fleet {
		g(descSparesAssigned, float64(d.pub.fleet.assignedSpares()))
	}
	if domain := d.pub.currentDomain(); domain.Fabric {
		for _, reason := range gpu.DomainReasons {
			g(descNoDomain, boolGauge(reason == domain.Reason), string(reason))
		}
	}
}

// boolGauge is a gauge's value for a condition: 1 when it holds.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectSamples exports the last sampling pass: each device's use, and
// the claims' idleness.
func collectSamples(g gauge, snap *telemetrySnapshot) {
	for _, u := range snap.devices {
		labels := []string{u.device, u.uuid, u.model, u.namespace, u.claim, u.pods}
		s := u.sample
		if s.Utilization != nil {
			g(descUtilization, *s.Utilization, labels...)
		}
		if s.MemoryUtilization != nil {
			g(descMemUtil, *s.MemoryUtilization, labels...)
		}
		if s.MemoryUsedBytes != nil {
			g(descMemUsed, float64(*s.MemoryUsedBytes), labels...)
		}
		if s.MemoryTotalBytes != nil {
			g(descMemTotal, float64(*s.MemoryTotalBytes), labels...)
		}
		if s.TemperatureCelsius != nil {
			g(descTemperature, *s.TemperatureCelsius, labels...)
		}
		if s.PowerWatts != nil {
			g(descPower, *s.PowerWatts, labels...)
		}
	}
	idleClaims := 0
	for _, cl := range snap.claims {
		g(descClaimIdle, cl.idleFor.Seconds(), cl.namespace, cl.claim, cl.pods)
		if cl.idle {
			idleClaims++
		}
	}
	g(descClaimsIdle, float64(idleClaims))
}
