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

package controller

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpudra/gpudra/internal/admission"
	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/metricdoc"
)

var (
	deviceLabels        = []string{"node", "model", "type", "profile"}
	deviceSharingLabels = append(slices.Clone(deviceLabels), "sharing")
)

// The controller's metrics. docs/observability.md lists them, generated
// from Metrics (go test ./internal/controller -run TestMetricDocs -update).
var (
	MetricDevicesPublished = metricdoc.Metric{Name: "gpudra_devices_published", Type: metricdoc.Gauge, Labels: deviceSharingLabels,
		Help: "Devices of this driver in the newest ResourceSlices, by node, model (productName), type (gpu, mig; imex-channel: the NVLink domains' channel pools, under an empty node and model), MIG profile and sharing: exclusive (one claim at a time) or shareable (allowMultipleAllocations: consumable capacity, and the shared channel 0). For MIG these are the placements the scheduler may pick, not instances."}
	MetricDevicesAllocated = metricdoc.Metric{Name: "gpudra_devices_allocated", Type: metricdoc.Gauge, Labels: deviceSharingLabels,
		Help: "Published devices that a ResourceClaim's allocation holds (admin access does not count), by node, model, type, MIG profile and sharing: MPS or TimeSlicing (what the claim's and its DeviceClass's configs of this driver ask for, merged as the plugin merges them), share (a share smaller than the GPU whose configs ask for no strategy: the node pool's --consumable-capacity-sharing applies, which the controller does not know), none (no sharing asked for) or invalid (configs the plugin would refuse). A GPU several claims share counts once, under the first of MPS, TimeSlicing, share, none, invalid that one of them has. A group with nothing allocated has one series, sharing=\"none\", at 0."}
	MetricDevicesTainted = metricdoc.Metric{Name: "gpudra_devices_tainted", Type: metricdoc.Gauge, Labels: deviceLabels,
		Help: "Published devices with at least one device taint (e.g. gpu.gpudra.io/unhealthy after an XID), by node, model, type and MIG profile."}
	MetricGPUs = metricdoc.Metric{Name: "gpudra_gpus", Type: metricdoc.Gauge, Labels: []string{"node", "model", "state"},
		Help: "Whole GPUs by node, model and state: free (nothing allocated), whole (allocated as one device) or partitioned (at least one MIG partition allocated)."}
	MetricClaimsAllocated = metricdoc.Metric{Name: "gpudra_claims_allocated", Type: metricdoc.Gauge,
		Help: "ResourceClaims with at least one device of this driver allocated."}
	MetricClaimsPending = metricdoc.Metric{Name: "gpudra_claims_pending", Type: metricdoc.Gauge,
		Help: "ResourceClaims for this driver's DeviceClasses that a running or pending pod uses and that are not allocated yet."}
	MetricClaimsPendingOldest = metricdoc.Metric{Name: "gpudra_claims_pending_oldest_age_seconds", Type: metricdoc.Gauge,
		Help: "Age of the oldest pending claim (see gpudra_claims_pending), 0 when none waits."}
	MetricGPUsStranded = metricdoc.Metric{Name: "gpudra_gpus_stranded", Type: metricdoc.Gauge, Labels: []string{"node", "model"},
		Help: "Free whole GPUs that no pending pod can use: those left free however many of the waiting pods the real allocator places (e.g. free GPUs scattered over NVLink islands while an eight-GPU same-island claim waits), on the nodes their node selectors, affinity and tolerations allow, a gang placed whole or not at all. GPUs a DeviceTaintRule takes out of service (NoSchedule, NoExecute) are not stranded. 0 while nothing waits."}
	MetricPodsPending = metricdoc.Metric{Name: "gpudra_pods_pending", Type: metricdoc.Gauge,
		Help: "Pods not bound to a node yet that wait for this driver's devices (claims or mapped extended resources)."}
	MetricPodsUnsatisfiable = metricdoc.Metric{Name: "gpudra_pods_unsatisfiable", Type: metricdoc.Gauge,
		Help: "Pending pods whose claims fit together on no node with the devices free now (among the nodes the pod's node selector, affinity and tolerations allow); every pending pod of a gang that cannot be placed whole."}
	MetricWorkloadsPending = metricdoc.Metric{Name: "gpudra_workloads_pending", Type: metricdoc.Gauge,
		Help: "What waits for this driver's devices, a gang (the pending pods of a PodGroup with a gang policy) counting once and every other pending pod once."}
	MetricWorkloadsUnsatisfiable = metricdoc.Metric{Name: "gpudra_workloads_unsatisfiable", Type: metricdoc.Gauge,
		Help: "Pending workloads that cannot be placed now: a pod whose claims fit together on no node its node selector, affinity and tolerations allow, or a gang that cannot be placed whole."}
	MetricStrandErrors = metricdoc.Metric{Name: "gpudra_fleet_stranded_errors_total", Type: metricdoc.Counter,
		Help: "Recomputes whose stranded-GPU accounting failed (the allocator returned an error); the other fleet metrics are still current."}
	MetricRecomputes = metricdoc.Metric{Name: "gpudra_fleet_recomputes_total", Type: metricdoc.Counter,
		Help: "Fleet accounting recomputes; they follow API changes, at most one per --recompute-interval."}
	MetricRecomputeDuration = metricdoc.Metric{Name: "gpudra_fleet_recompute_duration_seconds", Type: metricdoc.Histogram,
		Help: "Time one fleet accounting recompute took."}
	MetricLastRecompute = metricdoc.Metric{Name: "gpudra_fleet_last_recompute_timestamp_seconds", Type: metricdoc.Gauge,
		Help: "Unix time the fleet metrics were last recomputed; they describe the cluster as of then."}
	MetricMigSpareNodes = metricdoc.Metric{Name: "gpudra_mig_spare_nodes", Type: metricdoc.Gauge, Labels: []string{"state"},
		Help: "The fleet's spare nodes (--mig-spare-nodes; exported while it is not 0): target (the nodes that should publish a free GPU's MIG placements, so a first partition claim finds one), with_spare (ready nodes that publish a free healthy GPU's placements, or are assigned one and have a free healthy partitionable GPU: the plugin has yet to publish it) and assigned (the nodes the ConfigMap --mig-spares-configmap assigns a spare). with_spare below target for long: no free partitionable GPU is left where one could be assigned, or the ConfigMap cannot be written (gpudra_mig_spares_write_errors_total)."}
	MetricMigSparePoolTarget = metricdoc.Metric{Name: "gpudra_mig_spare_pool_target", Type: metricdoc.Gauge, Labels: []string{"pool"},
		Help: "The nodes of each node pool (--mig-spare-pool-labels, as label=value; \"\" for the nodes with none) that should publish a free GPU's MIG placements: --mig-spare-nodes' share of the pool, raised by its partition demand with --mig-spare-follow-demand (up to every node of the pool)."}
	MetricMigSparePoolShare = metricdoc.Metric{Name: "gpudra_mig_spare_pool_demand_share", Type: metricdoc.Gauge, Labels: []string{"pool"},
		Help: "The share of each node pool's recent GPU claims that are MIG partitions (claims allocated in the last half hour or so, weighted by age with a 10-minute half-life, plus partition pods waiting for a spare, against a prior of 8 whole-GPU claims); exported with --mig-spare-follow-demand. From 0.1 the pool keeps more spares than --mig-spare-nodes gives it, from 0.25 one on every node."}
	MetricMigSpareWriteErrors = metricdoc.Metric{Name: "gpudra_mig_spares_write_errors_total", Type: metricdoc.Counter, Labels: []string{"reason"},
		Help: "Failed reads and writes of the ConfigMap of the fleet's spare nodes, by reason: missing (the ConfigMap does not exist; the chart creates it, the controller may not), conflict (it changed since it was read) or error (anything else). Each is retried at the next recompute."}
	MetricAdmissionReviews = metricdoc.Metric{Name: "gpudra_admission_reviews_total", Type: metricdoc.Counter, Labels: []string{"kind", "result"},
		Help: "Admission requests answered, by kind (ResourceClaim, ResourceClaimTemplate, DeviceClass, or other) and result: allowed, denied (an invalid config of this driver), error (a review that cannot be judged: a kind the webhook does not validate) or refused (kind other: answered with an HTTP error, unjudged, because the API server never sends such a request, past its size limits or not an AdmissionReview, or because the reviews in flight left no room; many mean someone other than the API server calls the webhook). Every kind and result is exported from the start, at 0 (refused for other only)."}
	MetricAdmissionDuration = metricdoc.Metric{Name: "gpudra_admission_review_duration_seconds", Type: metricdoc.Histogram, Labels: []string{"kind"},
		Help: "Time to decide one admission review, by kind (as for gpudra_admission_reviews_total)."}
	MetricCertificateExpiry = metricdoc.Metric{Name: "gpudra_webhook_certificate_expiry_timestamp_seconds", Type: metricdoc.Gauge,
		Help: "Unix time the webhook's serving certificate expires; 0 before one is loaded."}
	MetricLeader = metricdoc.Metric{Name: "gpudra_controller_leader", Type: metricdoc.Gauge,
		Help: "1 on the replica that holds the leader lease and exports the fleet metrics, 0 on the others."}
)

// Metrics lists every metric the controller exports, in the order the
// docs show them.
var Metrics = []metricdoc.Metric{
	MetricDevicesPublished, MetricDevicesAllocated, MetricDevicesTainted, MetricGPUs,
	MetricClaimsAllocated, MetricClaimsPending, MetricClaimsPendingOldest,
	MetricGPUsStranded, MetricPodsPending, MetricPodsUnsatisfiable, MetricWorkloadsPending, MetricWorkloadsUnsatisfiable,
	MetricAdmissionReviews, MetricAdmissionDuration, MetricCertificateExpiry,
	MetricLeader, MetricRecomputes, MetricRecomputeDuration, MetricLastRecompute, MetricStrandErrors,
	MetricMigSpareNodes, MetricMigSparePoolTarget, MetricMigSparePoolShare, MetricMigSpareWriteErrors,
}

var (
	descDevicesPublished       = MetricDevicesPublished.Desc()
	descDevicesAllocated       = MetricDevicesAllocated.Desc()
	descDevicesTainted         = MetricDevicesTainted.Desc()
	descGPUs                   = MetricGPUs.Desc()
	descClaimsAllocated        = MetricClaimsAllocated.Desc()
	descClaimsPending          = MetricClaimsPending.Desc()
	descClaimsPendingOldest    = MetricClaimsPendingOldest.Desc()
	descGPUsStranded           = MetricGPUsStranded.Desc()
	descPodsPending            = MetricPodsPending.Desc()
	descPodsUnsatisfiable      = MetricPodsUnsatisfiable.Desc()
	descWorkloadsPending       = MetricWorkloadsPending.Desc()
	descWorkloadsUnsatisfiable = MetricWorkloadsUnsatisfiable.Desc()
)

// metrics are the controller's own instruments.
type metrics struct {
	registry          *prometheus.Registry
	recomputes        prometheus.Counter
	recomputeDuration prometheus.Histogram
	lastRecompute     prometheus.Gauge
	reviews           *prometheus.CounterVec
	reviewDuration    *prometheus.HistogramVec
	leader            prometheus.Gauge
	strandErrors      prometheus.Counter
	fleet             *fleetCollector
	// spareNodes, sparePoolTarget, sparePoolShare and spareWriteErrors are the fleet's spare nodes
	// (spares.go), registered by registerSpares.
	spareNodes       *prometheus.GaugeVec
	sparePoolTarget  *prometheus.GaugeVec
	sparePoolShare   *prometheus.GaugeVec
	spareWriteErrors *prometheus.CounterVec
}

// newMetrics registers the metrics of what the replica runs: the fleet
// accounting (and the leader gauge, which says who exports it), the
// webhook, or both.
func newMetrics(fleetAccounting, webhook bool) *metrics {
	m := &metrics{
		registry:          prometheus.NewRegistry(),
		recomputes:        MetricRecomputes.Counter(),
		recomputeDuration: MetricRecomputeDuration.Histogram(prometheus.ExponentialBuckets(0.001, 4, 10)),
		lastRecompute:     MetricLastRecompute.Gauge(),
		reviews:           MetricAdmissionReviews.CounterVec(),
		reviewDuration:    MetricAdmissionDuration.HistogramVec(prometheus.ExponentialBuckets(0.0001, 4, 8)),
		leader:            MetricLeader.Gauge(),
		strandErrors:      MetricStrandErrors.Counter(),
		fleet:             &fleetCollector{},
		spareNodes:        MetricMigSpareNodes.GaugeVec(),
		sparePoolTarget:   MetricMigSparePoolTarget.GaugeVec(),
		sparePoolShare:    MetricMigSparePoolShare.GaugeVec(),
		spareWriteErrors:  MetricMigSpareWriteErrors.CounterVec(),
	}
	if fleetAccounting {
		m.registry.MustRegister(m.recomputes, m.recomputeDuration, m.lastRecompute, m.leader, m.strandErrors, m.fleet)
	}
	if webhook {
		// Every kind and result from the start, at 0: increase() then
		// sees the first denied or failed review, not a series that
		// appears at 1.
		for _, kind := range reviewKinds {
			for _, result := range []admission.Result{admission.Allowed, admission.Denied, admission.Errored} {
				m.reviews.WithLabelValues(kind, string(result))
			}
			m.reviewDuration.WithLabelValues(kind)
		}
		m.reviews.WithLabelValues(kindOther, string(admission.Refused))
		m.registry.MustRegister(m.reviews, m.reviewDuration)
	}
	return m
}

// registerSpares exports the fleet's spare nodes, every series from the
// start, at 0.
func (m *metrics) registerSpares() {
	for _, state := range []string{"target", "with_spare", "assigned"} {
		m.spareNodes.WithLabelValues(state)
	}
	for _, reason := range []string{spareErrMissing, spareErrConflict, spareErrOther} {
		m.spareWriteErrors.WithLabelValues(reason)
	}
	m.registry.MustRegister(m.spareNodes, m.sparePoolTarget, m.sparePoolShare, m.spareWriteErrors)
}

// reviewKinds are the kind label's values: the kinds the webhook
// validates, and "other" for whatever else an API server sends (an
// unusable request), which keeps the label's values few and known.
var reviewKinds = []string{admission.KindResourceClaim, admission.KindResourceClaimTemplate, admission.KindDeviceClass, kindOther}

const kindOther = "other"

// watchCertificate exports the expiry of the certificate the source serves.
func (m *metrics) watchCertificate(src CertificateSource) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricCertificateExpiry.Name, Help: MetricCertificateExpiry.Help},
		func() float64 {
			if c, err := src.GetCertificate(nil); err == nil && c.Leaf != nil {
				return float64(c.Leaf.NotAfter.Unix())
			}
			return 0
		}))
}

func (m *metrics) observeReview(kind string, result admission.Result, took time.Duration) {
	if !slices.Contains(reviewKinds, kind) {
		kind = kindOther
	}
	m.reviews.WithLabelValues(kind, string(result)).Inc()
	m.reviewDuration.WithLabelValues(kind).Observe(took.Seconds())
}

// fleetCollector exports the last fleet snapshot; nothing before the first
// one (and nothing on a replica that is not the leader).
type fleetCollector struct {
	snap atomic.Pointer[fleet.Snapshot]
}

func (c *fleetCollector) set(s *fleet.Snapshot) { c.snap.Store(s) }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDevicesPublished, descDevicesAllocated, descDevicesTainted, descGPUs,
		descClaimsAllocated, descClaimsPending, descClaimsPendingOldest, descGPUsStranded, descPodsPending, descPodsUnsatisfiable, descWorkloadsPending, descWorkloadsUnsatisfiable} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap.Load()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for k, v := range s.Devices {
		labels := []string{k.Node, k.Model, k.Type, k.Profile}
		if n := v.Published - v.Shareable; n > 0 {
			gauge(descDevicesPublished, float64(n), append(labels, fleet.SharingExclusive)...)
		}
		if v.Shareable > 0 {
			gauge(descDevicesPublished, float64(v.Shareable), append(labels, fleet.SharingShareable)...)
		}
		if v.Allocated == 0 {
			// A series per group, so that a dashboard sums without gaps.
			gauge(descDevicesAllocated, 0, append(labels, fleet.SharingNone)...)
		}
		for sharing, n := range v.AllocatedBySharing {
			gauge(descDevicesAllocated, float64(n), append(labels, sharing)...)
		}
		gauge(descDevicesTainted, float64(v.Tainted), labels...)
	}
	for k, v := range s.GPUs {
		gauge(descGPUs, float64(v.Free), k.Node, k.Model, "free")
		gauge(descGPUs, float64(v.Whole), k.Node, k.Model, "whole")
		gauge(descGPUs, float64(v.Partitioned), k.Node, k.Model, "partitioned")
		// Every node with GPUs has a stranded series, 0 or not, so that
		// a dashboard sums over nodes without gaps.
		gauge(descGPUsStranded, float64(s.Stranding.Stranded[k]), k.Node, k.Model)
	}
	gauge(descPodsPending, float64(s.Stranding.PendingPods))
	gauge(descPodsUnsatisfiable, float64(s.Stranding.Unsatisfiable))
	gauge(descWorkloadsPending, float64(s.Stranding.Workloads))
	gauge(descWorkloadsUnsatisfiable, float64(s.Stranding.UnsatisfiableWorkloads))
	gauge(descClaimsAllocated, float64(s.AllocatedClaims))
	gauge(descClaimsPending, float64(len(s.Pending)))
	gauge(descClaimsPendingOldest, s.OldestPendingAge().Seconds())
}
