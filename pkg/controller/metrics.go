package controller

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpudra/gpudra/pkg/admission"
	"github.com/gpudra/gpudra/pkg/fleet"
)

// Metric names the controller exports. docs/observability.md lists each
// with its help text; a test keeps the two in step.
const (
	MetricDevicesPublished    = "gpudra_devices_published"
	MetricDevicesAllocated    = "gpudra_devices_allocated"
	MetricDevicesTainted      = "gpudra_devices_tainted"
	MetricGPUs                = "gpudra_gpus"
	MetricClaimsAllocated     = "gpudra_claims_allocated"
	MetricClaimsPending       = "gpudra_claims_pending"
	MetricClaimsPendingOldest = "gpudra_claims_pending_oldest_age_seconds"
	MetricRecomputes          = "gpudra_fleet_recomputes_total"
	MetricRecomputeDuration   = "gpudra_fleet_recompute_duration_seconds"
	MetricLastRecompute       = "gpudra_fleet_last_recompute_timestamp_seconds"
	MetricAdmissionReviews    = "gpudra_admission_reviews_total"
	MetricAdmissionDuration   = "gpudra_admission_review_duration_seconds"
	MetricCertificateExpiry   = "gpudra_webhook_certificate_expiry_timestamp_seconds"
	MetricLeader              = "gpudra_controller_leader"
)

var (
	deviceLabels = []string{"node", "model", "type", "profile"}

	descDevicesPublished = prometheus.NewDesc(MetricDevicesPublished,
		"Devices of this driver in the newest ResourceSlices, by node, model (productName), type (gpu, mig) and MIG profile. For MIG these are the placements the scheduler may pick, not instances.",
		deviceLabels, nil)
	descDevicesAllocated = prometheus.NewDesc(MetricDevicesAllocated,
		"Published devices that a ResourceClaim's allocation holds (admin access does not count), by node, model, type and MIG profile.",
		deviceLabels, nil)
	descDevicesTainted = prometheus.NewDesc(MetricDevicesTainted,
		"Published devices with at least one device taint (e.g. gpu.gpudra.io/unhealthy after an XID), by node, model, type and MIG profile.",
		deviceLabels, nil)
	descGPUs = prometheus.NewDesc(MetricGPUs,
		"Whole GPUs by node, model and state: free (nothing allocated), whole (allocated as one device) or partitioned (at least one MIG partition allocated).",
		[]string{"node", "model", "state"}, nil)
	descClaimsAllocated = prometheus.NewDesc(MetricClaimsAllocated,
		"ResourceClaims with at least one device of this driver allocated.", nil, nil)
	descClaimsPending = prometheus.NewDesc(MetricClaimsPending,
		"ResourceClaims for this driver's DeviceClasses that a running or pending pod uses and that are not allocated yet.", nil, nil)
	descClaimsPendingOldest = prometheus.NewDesc(MetricClaimsPendingOldest,
		"Age of the oldest pending claim (see gpudra_claims_pending), 0 when none waits.", nil, nil)
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
	fleet             *fleetCollector
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		recomputes: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricRecomputes,
			Help: "Fleet accounting recomputes; they follow API changes, at most one per --recompute-interval."}),
		recomputeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricRecomputeDuration,
			Help:    "Time one fleet accounting recompute took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		lastRecompute: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastRecompute,
			Help: "Unix time the fleet metrics were last recomputed; they describe the cluster as of then."}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAdmissionReviews,
			Help: "Admission reviews answered, by kind and result: allowed, denied (an invalid config of this driver) or error (an unusable request)."},
			[]string{"kind", "result"}),
		reviewDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricAdmissionDuration,
			Help:    "Time to decide one admission review, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8)}, []string{"kind"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLeader,
			Help: "1 on the replica that holds the leader lease and exports the fleet metrics, 0 on the others."}),
		fleet: &fleetCollector{},
	}
	m.registry.MustRegister(m.recomputes, m.recomputeDuration, m.lastRecompute, m.reviews, m.reviewDuration, m.leader, m.fleet)
	return m
}

// watchCertificate exports the expiry of the certificate the source serves.
func (m *metrics) watchCertificate(src CertificateSource) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricCertificateExpiry,
		Help: "Unix time the webhook's serving certificate expires; 0 before one is loaded."},
		func() float64 {
			if c, err := src.GetCertificate(nil); err == nil && c.Leaf != nil {
				return float64(c.Leaf.NotAfter.Unix())
			}
			return 0
		}))
}

func (m *metrics) observeReview(kind string, result admission.Result, took time.Duration) {
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
		descClaimsAllocated, descClaimsPending, descClaimsPendingOldest} {
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
		gauge(descDevicesPublished, float64(v.Published), labels...)
		gauge(descDevicesAllocated, float64(v.Allocated), labels...)
		gauge(descDevicesTainted, float64(v.Tainted), labels...)
	}
	for k, v := range s.GPUs {
		gauge(descGPUs, float64(v.Free), k.Node, k.Model, "free")
		gauge(descGPUs, float64(v.Whole), k.Node, k.Model, "whole")
		gauge(descGPUs, float64(v.Partitioned), k.Node, k.Model, "partitioned")
	}
	gauge(descClaimsAllocated, float64(s.AllocatedClaims))
	gauge(descClaimsPending, float64(len(s.Pending)))
	gauge(descClaimsPendingOldest, s.OldestPendingAge().Seconds())
}
