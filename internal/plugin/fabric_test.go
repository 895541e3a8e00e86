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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// noDomainGauge returns MetricNVLinkDomainUnavailable by reason.
func noDomainGauge(t *testing.T, d *Driver) map[string]float64 {
	t.Helper()
	families, err := d.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != MetricNVLinkDomainUnavailable.Name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[label(m, "reason")] = m.GetGauge().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// wantedDomains is the nvlinkDomain of every whole GPU the plugin wants
// published ("" for none).
func wantedDomains(d *Driver) []string {
	d.pub.publishMu.Lock()
	defer d.pub.publishMu.Unlock()
	var out []string
	if d.pub.steps.wanted == nil {
		return nil
	}
	for _, s := range d.pub.steps.wanted.Slices {
		for _, dev := range s.Devices {
			if p, ok := gpu.ParseDeviceName(dev.Name); !ok || p.MIG || strings.HasSuffix(dev.Name, "-monitor") {
				continue
			}
			v := ""
			if a, ok := dev.Attributes[slicebuilder.AttrNVLinkDomain]; ok && a.StringValue != nil {
				v = *a.StringValue
			}
			out = append(out, v)
		}
	}
	return out
}

// A tray whose fabric probe has not finished is published without a
// domain, says why (Event, metric), and joins its domain at the next
// fabric refresh once the probe completes.
func TestFabricNotReadyThenDomain(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir, err := os.MkdirTemp("", "gpudra-fabric-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	profile := filepath.Join(dir, "tray.yaml")
	if err := os.WriteFile(profile, []byte("profile: gb200-tray\nfabric: {state: IN_PROGRESS}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := startConfigProfile(t, profile)
	cfg.FabricRefreshInterval = time.Hour // the test refreshes itself
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	if dom := d.pub.currentDomain(); dom.InDomain() || dom.Reason != gpu.ReasonNotCompleted {
		t.Fatalf("domain %+v, want none: the probe is in progress", dom)
	}
	if g := noDomainGauge(t, d); g["not_completed"] != 1 || g["unhealthy"] != 0 || len(g) != len(gpu.DomainReasons) {
		t.Errorf("%s = %v, want not_completed 1 and every other reason 0", MetricNVLinkDomainUnavailable.Name, g)
	}
	for _, v := range wantedDomains(d) {
		if v != "" {
			t.Errorf("a GPU is published in domain %q while the probe is in progress", v)
		}
	}
	// The Event, recorded asynchronously by the broadcaster.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cfg.KubeClient.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == ReasonNVLinkDomainUnavailable && e.InvolvedObject.Kind == "Node" && strings.Contains(e.Message, "gpu-0: fabric state IN_PROGRESS") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Event on the Node naming the GPU: %v", ReasonNVLinkDomainUnavailable, err)
	}

	if err := nvmlfake.SetFabric(filepath.Join(cfg.PluginDataDir, "..", "..", "fake-gpus"), "", nvmlfake.FabricChange{State: "COMPLETED"}); err != nil {
		t.Fatal(err)
	}
	d.pub.refreshFabric(ctx)
	const want = "00000001-0000-0000-0000-000000000001.2"
	if dom := d.pub.currentDomain(); dom.Name != want {
		t.Fatalf("domain %+v after the probe completed, want %s", dom, want)
	}
	if g := noDomainGauge(t, d); g["not_completed"] != 0 {
		t.Errorf("%s = %v after joining the domain, want all 0", MetricNVLinkDomainUnavailable.Name, g)
	}
	// The republish it asked for.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got := wantedDomains(d)
		return len(got) == 4 && got[0] == want && got[3] == want, nil
	})
	if err != nil {
		t.Errorf("the GPUs were not republished in the domain: %v (wanted %v)", err, wantedDomains(d))
	}
}
