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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpudra/gpudra/internal/metricdoc"
)

var (
	deviceLabels = []string{"device", "uuid", "model", "namespace", "claim", "pod"}
	claimLabels  = []string{"namespace", "claim", "pod"}
	// UUID and GPU_I_ID are spelled as DCGM exporter spells them, so that
	// a join needs no label_replace.
	deviceInfoLabels = []string{"device", "type", "uuid", "UUID", "GPU_I_ID", "profile", "model", "state", "namespace", "claim", "pod"}
)

// The kubelet plugin's metrics; every series also carries the label node.
// docs/observability.md lists them, generated from Metrics (go test
// ./internal/controller -run TestMetricDocs -update).
var (
	MetricRequests = metricdoc.Metric{Name: "gpudra_plugin_requests_total", Type: metricdoc.Counter, Labels: []string{"operation", "result"},
		Help: "Claims prepared or unprepared for the kubelet, by operation (prepare, unprepare) and result (success, error); every operation and result is exported from the start, at 0."}
	MetricRequestDuration = metricdoc.Metric{Name: "gpudra_plugin_request_duration_seconds", Type: metricdoc.Histogram, Labels: []string{"operation"},
		Help: "Time to prepare or unprepare one claim, by operation; MIG creation and CDI spec writes included."}
	MetricPreparedClaims = metricdoc.Metric{Name: "gpudra_plugin_prepared_claims", Type: metricdoc.Gauge,
		Help: "Claims prepared on this node (their containers can start)."}
	MetricPreparedDevices = metricdoc.Metric{Name: "gpudra_plugin_prepared_devices", Type: metricdoc.Gauge, Labels: []string{"type", "access"},
		Help: "Devices of prepared claims on this node, by type (gpu, mig, imex-channel: an IMEX channel of the node's NVLink domain) and access (exclusive, or admin for monitoring)."}
	MetricMigCreated = metricdoc.Metric{Name: "gpudra_plugin_mig_instances_created_total", Type: metricdoc.Counter,
		Help: "MIG GPU instances the plugin created for claims."}
	MetricMigDestroyed = metricdoc.Metric{Name: "gpudra_plugin_mig_instances_destroyed_total", Type: metricdoc.Counter,
		Help: "MIG GPU instances the plugin destroyed (a claim released, or half-created work rolled back)."}
	MetricUnhealthyDevices = metricdoc.Metric{Name: "gpudra_plugin_unhealthy_devices", Type: metricdoc.Gauge,
		Help: "GPUs this plugin reports unhealthy: tainted in the ResourceSlices with their MIG partitions, and unhealthy in the kubelet's health stream."}
	MetricMPSDaemons = metricdoc.Metric{Name: "gpudra_plugin_mps_daemons", Type: metricdoc.Gauge, Labels: []string{"state"},
		Help: "MPS control daemons the plugin runs on this node, one per shared GPU or MIG device, by state: running (answered at the last check) or unhealthy (did not answer at the last check: its device is reported unhealthy while the plugin restarts it)."}
	MetricReady = metricdoc.Metric{Name: "gpudra_plugin_ready", Type: metricdoc.Gauge,
		Help: "1 when the kubelet has registered the plugin and the API server holds its ResourceSlices as built (its readiness); 0 while it starts (/metrics answers before discovery)."}
	MetricSampleErrors = metricdoc.Metric{Name: "gpudra_plugin_sample_errors_total", Type: metricdoc.Counter,
		Help: "Devices NVML could not be asked about their use in a sampling pass."}
	MetricDeviceUtilization = metricdoc.Metric{Name: "gpudra_device_utilization_ratio", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Fraction (0-1) of the last sample period in which a kernel ran on the GPU, from NVML, labelled with the claim holding the device and the pods it is reserved for. Absent for MIG devices and GPUs in MIG mode, which NVML does not report."}
	MetricDeviceMemUtil = metricdoc.Metric{Name: "gpudra_device_memory_utilization_ratio", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Fraction (0-1) of the last sample period in which GPU memory was read or written, from NVML."}
	MetricDeviceMemoryUsed = metricdoc.Metric{Name: "gpudra_device_memory_used_bytes", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Framebuffer memory in use on the GPU or MIG device, from NVML."}
	MetricDeviceMemoryTotal = metricdoc.Metric{Name: "gpudra_device_memory_total_bytes", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Framebuffer memory of the GPU or MIG device, from NVML."}
	MetricDeviceTemperature = metricdoc.Metric{Name: "gpudra_device_temperature_celsius", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "GPU die temperature, from NVML."}
	MetricDevicePower = metricdoc.Metric{Name: "gpudra_device_power_watts", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Board power draw, from NVML."}
	MetricClaimIdleSeconds = metricdoc.Metric{Name: "gpudra_claim_idle_seconds", Type: metricdoc.Gauge, Labels: claimLabels,
		Help: "How long every device of the claim has stayed below --idle-threshold utilization (0 while busy), counted from when the plugin saw the claim prepared. Absent while a device's utilization is unknown (MIG)."}
	MetricDeviceInfo = metricdoc.Metric{Name: "gpudra_device_info", Type: metricdoc.Gauge, Labels: deviceInfoLabels,
		Help: "1 for every GPU of the node and every MIG device prepared on it, with its state (free, allocated, shared: a share of it held, partitioned: MIG devices of it held, unmanaged: MIG instances made outside gpudra, unhealthy), the claim holding it and the claim's pods, and DCGM exporter's keys: UUID (the GPU's; a MIG device's parent's) and GPU_I_ID (a MIG device's GPU instance ID), so that DCGM's metrics join to pods (docs/observability.md#dcgm-exporter). A GPU shared by several claims has one series per claim."}
	MetricClaimsIdle = metricdoc.Metric{Name: "gpudra_claims_idle", Type: metricdoc.Gauge,
		Help: "Claims on this node idle for at least --idle-after."}
	MetricMigSparesAssigned = metricdoc.Metric{Name: "gpudra_plugin_mig_spares_assigned", Type: metricdoc.Gauge,
		Help: "Spare GPUs gpudra-controller assigned this node (--mig-spare-gpus=fleet): its entry in the --mig-spares-configmap ConfigMap; 0 where it has none, the ConfigMap is missing or not read yet, or the entry is not a number from 1. The node keeps that many free GPUs publishing their MIG placements, beside its partitioned GPUs and the free ones published before, which stay. Absent in the other modes."}
	MetricNVLinkDomainUnavailable = metricdoc.Metric{Name: "gpudra_plugin_nvlink_domain_unavailable", Type: metricdoc.Gauge, Labels: []string{"reason"},
		Help: "On a node whose GPUs are in a multi-node NVLink fabric (GB200/GB300 NVL72), 1 for the reason it is in no NVLink domain and 0 for the others; all 0 while it is in one. Reasons: not_completed (a GPU's fabric probe is not COMPLETED), probe_failed, no_cluster_uuid, unhealthy, cliques_differ, clusters_differ, unreadable (NVML failed), not_every_gpu. The Event NVLinkDomainUnavailable on the Node names the GPU. Absent on nodes outside any fabric."}
	MetricDevicePluginConflict = metricdoc.Metric{Name: "gpudra_plugin_device_plugin_conflict", Type: metricdoc.Gauge,
		Help: "1 while the Node advertises NVIDIA's device plugin's GPUs (nvidia.com/gpu, nvidia.com/gpu.<suffix> or nvidia.com/mig-<profile> above 0 in its status.capacity or allocatable): the node publishes none of its GPUs, so that none is given to two pods, until they are gone (the Event GPUsAdvertisedByDevicePlugin on the Node says how to turn the device plugin off; docs/gpu-operator.md). 0 otherwise, and always with --ignore-device-plugin."}
	MetricClaimStatusWrites = metricdoc.Metric{Name: "gpudra_plugin_claim_status_writes_total", Type: metricdoc.Counter, Labels: []string{"result"},
		Help: "Writes of prepared claims' status.devices (entries written at prepare, removed at unprepare), by result: success, gone (the claim was deleted, replaced or deallocated first) or error (retried with back-off; the log says why, e.g. missing RBAC)."}
)

// Metrics lists every metric the plugin exports, in the order the docs
// show them.
var Metrics = []metricdoc.Metric{
	MetricRequests, MetricRequestDuration, MetricPreparedClaims, MetricPreparedDevices,
	MetricMigCreated, MetricMigDestroyed, MetricMigSparesAssigned, MetricUnhealthyDevices, MetricMPSDaemons, MetricReady,
	MetricDeviceUtilization, MetricDeviceMemUtil, MetricDeviceMemoryUsed, MetricDeviceMemoryTotal,
	MetricDeviceTemperature, MetricDevicePower, MetricDeviceInfo, MetricClaimIdleSeconds, MetricClaimsIdle, MetricSampleErrors,
	MetricClaimStatusWrites, MetricNVLinkDomainUnavailable, MetricDevicePluginConflict,
}

// Results counted by MetricClaimStatusWrites.
const (
	statusResultSuccess = "success"
	statusResultGone    = "gone"
	statusResultError   = "error"
)

// Operations counted by MetricRequests, and its results.
const (
	opPrepare   = "prepare"
	opUnprepare = "unprepare"

	resultSuccess = "success"
	resultError   = "error"
)

// Instruments are the plugin's metrics and the registry that serves
// them. They are made before the plugin starts, so that /metrics answers
// from the first moment (cmd/kubelet-plugin serves it before discovery):
// gpudra_plugin_ready 0 until the plugin has started, and every counter
// and histogram at 0 for each of its label values from the start, so that
// rate() and increase() see the first error rather than a series that
// appears at 1.
type Instruments struct {
	registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	migCreated      prometheus.Counter
	migDestroyed    prometheus.Counter
	sampleErrors    prometheus.Counter
	devices         *deviceCollector
	statusWrites    *prometheus.CounterVec
}

// NewInstruments makes the plugin's metrics for the node; every series
// carries the label node.
func NewInstruments(nodeName string) *Instruments {
	m := &Instruments{
		registry:        prometheus.NewRegistry(),
		requests:        MetricRequests.CounterVec(),
		requestDuration: MetricRequestDuration.HistogramVec(prometheus.ExponentialBuckets(0.001, 2.5, 12)),
		migCreated:      MetricMigCreated.Counter(),
		migDestroyed:    MetricMigDestroyed.Counter(),
		sampleErrors:    MetricSampleErrors.Counter(),
		devices:         &deviceCollector{},
		statusWrites:    MetricClaimStatusWrites.CounterVec(),
	}
	for _, op := range []string{opPrepare, opUnprepare} {
		for _, result := range []string{resultSuccess, resultError} {
			m.requests.WithLabelValues(op, result)
		}
		m.requestDuration.WithLabelValues(op)
	}
	for _, r := range []string{statusResultSuccess, statusResultGone, statusResultError} {
		m.statusWrites.WithLabelValues(r)
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node": nodeName}, m.registry)
	reg.MustRegister(m.requests, m.requestDuration, m.migCreated, m.migDestroyed, m.sampleErrors, m.statusWrites, m.devices)
	return m
}

// Registry is what /metrics serves.
func (m *Instruments) Registry() *prometheus.Registry { return m.registry }

// serve makes the collector export the started driver's state.
func (m *Instruments) serve(d *Driver) { m.devices.d.Store(d) }

// observe counts one request.
func (m *Instruments) observe(op string, start time.Time, err error) {
	result := resultSuccess
	if err != nil {
		result = resultError
	}
	m.requests.WithLabelValues(op, result).Inc()
	m.requestDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Registry is the plugin's metrics, for an HTTP handler.
func (d *Driver) Registry() *prometheus.Registry { return d.metrics.registry }
