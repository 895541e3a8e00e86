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

// Package componentmetrics is what every gpudra component's /metrics
// serves beside the component's own metrics, as Kubernetes components do:
// gpudra_build_info, the Go runtime's (go_*) and the process's
// (process_*) metrics, and client-go's (rest_client_*, workqueue_*,
// leader_election_*), registered in component-base's legacy registry
// exactly as kube-controller-manager and the kubelet register them.
package componentmetrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest_client_*, workqueue_*, leader_election_*

	"github.com/gpudra/gpudra/internal/metricdoc"
	"github.com/gpudra/gpudra/internal/version"
)

// BuildInfo says which build of which component runs.
var BuildInfo = metricdoc.Metric{Name: "gpudra_build_info", Type: metricdoc.Gauge, Labels: []string{"component", "version", "revision", "goversion"},
	Help: "Always 1; its labels say which gpudra component this is (kubelet-plugin, controller), its release (the chart's appVersion), the git revision it was built from and its Go version, as --version prints them. Every component's /metrics also serves the Go runtime (go_*), process (process_*) and client-go (rest_client_*, workqueue_*, leader_election_*) metrics Kubernetes components export."}

// Metrics lists the metrics this package adds, for the docs.
var Metrics = []metricdoc.Metric{BuildInfo}

// Gatherer is own, plus build info for component and the metrics every
// Kubernetes component exports.
func Gatherer(component string, own prometheus.Gatherer) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	info := version.Get()
	g := BuildInfo.GaugeVec()
	g.WithLabelValues(component, info.Version, info.Revision, info.GoVersion).Set(1)
	reg.MustRegister(g)
	return prometheus.Gatherers{legacyregistry.DefaultGatherer, reg, own}
}

// Handler serves Gatherer(component, own) as /metrics.
func Handler(component string, own prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(Gatherer(component, own), promhttp.HandlerOpts{})
}
