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
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestInstrumentsBeforeStart: before the plugin has started, /metrics
// says it is not ready, and every counter already has its series at 0,
// so that increase() sees the first error.
func TestInstrumentsBeforeStart(t *testing.T) {
	m := NewInstruments("gpu-node")
	want := `
# HELP gpudra_plugin_ready ` + MetricReady.Help + `
# TYPE gpudra_plugin_ready gauge
gpudra_plugin_ready{node="gpu-node"} 0
# HELP gpudra_plugin_requests_total ` + MetricRequests.Help + `
# TYPE gpudra_plugin_requests_total counter
gpudra_plugin_requests_total{node="gpu-node",operation="prepare",result="error"} 0
gpudra_plugin_requests_total{node="gpu-node",operation="prepare",result="success"} 0
gpudra_plugin_requests_total{node="gpu-node",operation="unprepare",result="error"} 0
gpudra_plugin_requests_total{node="gpu-node",operation="unprepare",result="success"} 0
# HELP gpudra_plugin_mig_instances_created_total ` + MetricMigCreated.Help + `
# TYPE gpudra_plugin_mig_instances_created_total counter
gpudra_plugin_mig_instances_created_total{node="gpu-node"} 0
# HELP gpudra_plugin_mig_instances_destroyed_total ` + MetricMigDestroyed.Help + `
# TYPE gpudra_plugin_mig_instances_destroyed_total counter
gpudra_plugin_mig_instances_destroyed_total{node="gpu-node"} 0
# HELP gpudra_plugin_sample_errors_total ` + MetricSampleErrors.Help + `
# TYPE gpudra_plugin_sample_errors_total counter
gpudra_plugin_sample_errors_total{node="gpu-node"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		MetricReady.Name, MetricRequests.Name, MetricMigCreated.Name, MetricMigDestroyed.Name, MetricSampleErrors.Name); err != nil {
		t.Error(err)
	}
	// Both operations' latency histograms exist, empty.
	if n, err := testutil.GatherAndCount(m.Registry(), MetricRequestDuration.Name); err != nil || n != 2 {
		t.Errorf("%s: %d series (%v), want one per operation", MetricRequestDuration.Name, n, err)
	}
	// Nothing about devices is exported before the plugin knows them.
	if n, _ := testutil.GatherAndCount(m.Registry(), MetricDeviceInfo.Name, MetricPreparedClaims.Name); n != 0 {
		t.Errorf("%d device or claim series before start-up, want none", n)
	}
}

// TestDeviceInfoFixture: the gpudra_device_info series the DCGM join tests
// evaluate (deployments/helm/gpudra/testdata/dcgm) carry only labels the
// plugin exports (and the scrape's job and instance).
func TestDeviceInfoFixture(t *testing.T) {
	raw, err := os.ReadFile("../../deployments/helm/gpudra/testdata/dcgm/dcgm_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"node": true, "job": true, "instance": true}
	for _, l := range MetricDeviceInfo.Labels {
		allowed[l] = true
	}
	series := regexp.MustCompile(MetricDeviceInfo.Name+`\{([^}]*)\}`).FindAllStringSubmatch(string(raw), -1)
	if len(series) == 0 {
		t.Fatal("the DCGM join tests use no gpudra_device_info series")
	}
	for _, s := range series {
		for _, l := range regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="`).FindAllStringSubmatch(s[1], -1) {
			if !allowed[l[1]] {
				t.Errorf("a tested %s series has the label %s, which the plugin does not export: %s", MetricDeviceInfo.Name, l[1], s[0])
			}
		}
	}
}
