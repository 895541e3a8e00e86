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
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/idle"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The plugin reads every GPU's (and every prepared MIG device's) use from
// NVML once per TelemetryInterval and exports it per device, labelled with
// the claim that holds the device and the pods the claim is reserved for,
// so that "GPU utilization per pod" needs no other exporter. The same pass
// feeds the idle tracker.

// deviceUse is one device's last sample and who holds it.
type deviceUse struct {
	device, uuid, model    string
	namespace, claim, pods string
	sample                 gpu.Sample
}

// claimIdle is one claim's idleness after the last pass.
type claimIdle struct {
	namespace, claim, pods string
	idleFor                time.Duration
	idle                   bool
}

// telemetrySnapshot is what the collector exports.
type telemetrySnapshot struct {
	devices []deviceUse
	claims  []claimIdle
}

// telemetry is the sampler's state.
type telemetry struct {
	tracker idle.Tracker
	last    atomic.Pointer[telemetrySnapshot]

	mu sync.Mutex
	// pods are the pods each claim (by UID) is reserved for, from the
	// claim the kubelet handed to prepare (or, after a restart, read back
	// once); seen is when the plugin first saw the claim prepared.
	pods map[string]string
	seen map[string]time.Time
}

// rememberPods records the pods a claim is reserved for.
func (t *telemetry) rememberPods(claim *resourceapi.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods[string(claim.UID)] = reservedPods(claim)
}

// reservedPods lists the pods of the claim's reservedFor, sorted and
// comma-separated.
func reservedPods(claim *resourceapi.ResourceClaim) string {
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			pods = append(pods, r.Name)
		}
	}
	sort.Strings(pods)
	return strings.Join(pods, ",")
}

// sampleLoop samples once per interval until ctx is done.
func (d *Driver) sampleLoop(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) { d.sample(ctx, time.Now()) }, d.cfg.TelemetryInterval)
}

// sample reads every device once and replaces what the collector exports.
func (d *Driver) sample(ctx context.Context, now time.Time) {
	logger := klog.FromContext(ctx)
	node := d.Node()
	claims := d.state.Claims()
	tel := &d.telemetry

	// Who holds what: a device in a workload claim is labelled with it;
	// admin access (a monitoring pod) does not hold a device.
	type holder struct{ claim checkpoint.Claim }
	holders := map[string]holder{} // by device name
	migs := map[string]string{}    // MIG device name → MIG UUID
	var migOrder []string
	for _, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, dev := range c.Devices {
			if dev.Mig != nil && dev.Mig.UUID != "" {
				if _, dup := migs[dev.Device]; !dup {
					migOrder = append(migOrder, dev.Device)
				}
				migs[dev.Device] = dev.Mig.UUID
			}
			if !dev.AdminAccess {
				holders[dev.Device] = holder{c}
			}
		}
	}
	d.fillPods(ctx, claims)

	tel.mu.Lock()
	for _, c := range claims {
		if _, ok := tel.seen[c.UID]; !ok && c.State == checkpoint.PrepareCompleted {
			tel.seen[c.UID] = now
		}
	}
	for uid := range tel.seen {
		if !slices.ContainsFunc(claims, func(c checkpoint.Claim) bool { return c.UID == uid }) {
			delete(tel.seen, uid)
			delete(tel.pods, uid)
		}
	}
	pods := maps.Clone(tel.pods)
	seen := maps.Clone(tel.seen)
	tel.mu.Unlock()

	snap := &telemetrySnapshot{}
	utilization := map[string]*float64{}
	add := func(name, uuid, model string) {
		s, err := d.cfg.Backend.Sample(uuid)
		if err != nil {
			d.metrics.sampleErrors.Inc()
			logger.V(3).Info("Sampling a device failed", "device", name, "uuid", uuid, "err", err)
			return
		}
		utilization[uuid] = s.Utilization
		u := deviceUse{device: name, uuid: uuid, model: model, sample: s}
		if h, ok := holders[name]; ok {
			u.namespace, u.claim, u.pods = h.claim.Namespace, h.claim.Name, pods[h.claim.UID]
		}
		snap.devices = append(snap.devices, u)
	}
	for _, g := range node.GPUs {
		add(g.DeviceName(), g.UUID, g.ProductName)
	}
	for _, name := range migOrder {
		model := ""
		if md, ok := node.MigDeviceByName(name); ok {
			model = md.Parent.ProductName
		}
		add(name, migs[name], model)
	}

	tel.tracker.Observe(now, utilization)
	for _, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		var uuids []string
		for _, dev := range c.Devices {
			if dev.AdminAccess || dev.Channel != nil {
				continue // an IMEX channel is no GPU
			}
			if dev.Mig != nil {
				uuids = append(uuids, dev.Mig.UUID)
			} else {
				uuids = append(uuids, dev.GPUUUID)
			}
		}
		idleFor, known := tel.tracker.IdleFor(now, seen[c.UID], uuids)
		if !known {
			continue
		}
		snap.claims = append(snap.claims, claimIdle{namespace: c.Namespace, claim: c.Name, pods: pods[c.UID],
			idleFor: idleFor, idle: tel.tracker.Idle(idleFor)})
	}
	tel.last.Store(snap)
}

// fillPods reads back, once, the pods of prepared claims the plugin has
// not seen prepared since it started.
func (d *Driver) fillPods(ctx context.Context, claims []checkpoint.Claim) {
	tel := &d.telemetry
	for _, c := range claims {
		tel.mu.Lock()
		_, known := tel.pods[c.UID]
		tel.mu.Unlock()
		if known || c.State != checkpoint.PrepareCompleted {
			continue
		}
		pods := ""
		obj, err := d.cfg.KubeClient.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err == nil && string(obj.UID) == c.UID {
			pods = reservedPods(obj)
		}
		tel.mu.Lock()
		tel.pods[c.UID] = pods
		tel.mu.Unlock()
	}
}

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
type deviceCollector struct{ d atomic.Pointer[Driver] }

func (c *deviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{descPreparedClaims, descPreparedDevices, descUnhealthy, descMPSDaemons, descReady,
		descUtilization, descMemUtil, descMemUsed, descMemTotal, descTemperature, descPower, descClaimIdle, descClaimsIdle,
		descDeviceInfo, descSparesAssigned, descNoDomain, descDevicePlugin} {
		ch <- desc
	}
}

func (c *deviceCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	d := c.d.Load()
	if d == nil {
		gauge(descReady, 0)
		return
	}
	for _, info := range d.deviceInfo() {
		gauge(descDeviceInfo, 1, info.labels()...)
	}
	prepared := 0
	devices := map[[2]string]int{
		{"gpu", "exclusive"}: 0, {"mig", "exclusive"}: 0, {"gpu", "admin"}: 0, {"mig", "admin"}: 0,
	}
	for _, cl := range d.state.Claims() {
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
	gauge(descPreparedClaims, float64(prepared))
	for k, n := range devices {
		gauge(descPreparedDevices, float64(n), k[0], k[1])
	}
	gauge(descUnhealthy, float64(d.health.unhealthyCount()))
	conflict := 0.0
	if d.pub.devicePlugin.resources() != nil {
		conflict = 1
	}
	gauge(descDevicePlugin, conflict)
	running, unhealthy := d.health.mpsDaemonStates(d.state.MPSDaemons())
	gauge(descMPSDaemons, float64(running), "running")
	gauge(descMPSDaemons, float64(unhealthy), "unhealthy")
	ready := 0.0
	if d.Ready() == nil {
		ready = 1
	}
	gauge(descReady, ready)
	if d.cfg.SpareGPUs.Fleet {
		gauge(descSparesAssigned, float64(d.pub.fleet.assignedSpares()))
	}
	if domain := d.pub.currentDomain(); domain.Fabric {
		for _, reason := range gpu.DomainReasons {
			v := 0.0
			if reason == domain.Reason {
				v = 1
			}
			gauge(descNoDomain, v, string(reason))
		}
	}

	snap := d.telemetry.last.Load()
	if snap == nil {
		return
	}
	for _, u := range snap.devices {
		labels := []string{u.device, u.uuid, u.model, u.namespace, u.claim, u.pods}
		s := u.sample
		if s.Utilization != nil {
			gauge(descUtilization, *s.Utilization, labels...)
		}
		if s.MemoryUtilization != nil {
			gauge(descMemUtil, *s.MemoryUtilization, labels...)
		}
		if s.MemoryUsedBytes != nil {
			gauge(descMemUsed, float64(*s.MemoryUsedBytes), labels...)
		}
		if s.MemoryTotalBytes != nil {
			gauge(descMemTotal, float64(*s.MemoryTotalBytes), labels...)
		}
		if s.TemperatureCelsius != nil {
			gauge(descTemperature, *s.TemperatureCelsius, labels...)
		}
		if s.PowerWatts != nil {
			gauge(descPower, *s.PowerWatts, labels...)
		}
	}
	idleClaims := 0
	for _, cl := range snap.claims {
		gauge(descClaimIdle, cl.idleFor.Seconds(), cl.namespace, cl.claim, cl.pods)
		if cl.idle {
			idleClaims++
		}
	}
	gauge(descClaimsIdle, float64(idleClaims))
}
