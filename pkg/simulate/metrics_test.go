package simulate

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/pkg/nvmlfake"
	"github.com/gpudra/gpudra/pkg/plugin"
)

// samples gathers a registry into "name{label=value,...}" → value, labels
// sorted by name.
func samples(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%s", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// find returns the value of the one series of name whose labels include
// all the given "label=value" pairs.
func find(t *testing.T, s map[string]float64, name string, labels ...string) (float64, bool) {
	t.Helper()
	var hits []string
	for k := range s {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && (strings.Contains(k, "{"+l+",") || strings.Contains(k, ","+l+",") || strings.Contains(k, ","+l+"}") || strings.Contains(k, "{"+l+"}"))
		}
		if ok {
			hits = append(hits, k)
		}
	}
	if len(hits) > 1 {
		t.Fatalf("%d series of %s match %v: %v", len(hits), name, labels, hits)
	}
	if len(hits) == 0 {
		return 0, false
	}
	return s[hits[0]], true
}

// TestPluginMetrics: the plugin exports each GPU's use as the fake reports
// it, labelled with the claim holding the GPU and its pod; MIG devices with
// their memory (NVML reports no utilization for them); the requests it
// served; MIG instances made and destroyed; and which claims are idle.
func TestPluginMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: shortTempDir(t), Profile: "dgx-h100", NodeName: "gpu-node",
		TelemetryInterval: 50 * time.Millisecond, IdleThreshold: 0.05, IdleAfter: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	applyClasses(ctx, t, c)
	reg := c.Driver.Registry()
	dir := c.Opts.FakeStateDir()

	busy, err := createAndRun(ctx, t, c, gpuClaim("busy", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	idle, err := createAndRun(ctx, t, c, gpuClaim("quiet", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	small, err := runClaim(ctx, t, c, migClaim("small", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	node := c.Driver.Node()
	uuidOf := func(device string) string {
		g, ok := node.GPUByDeviceName(device)
		if !ok {
			t.Fatalf("%s is not a whole GPU", device)
		}
		return g.UUID
	}
	busyGPU, idleGPU := allocatedDevices(busy)[0], allocatedDevices(idle)[0]
	migDevice := allocatedDevices(small)[0]
	migUUID := ""
	for _, cl := range c.Driver.State().Claims() {
		for _, d := range cl.Devices {
			if d.Mig != nil {
				migUUID = d.Mig.UUID
			}
		}
	}
	if err := nvmlfake.SetTelemetry(dir, uuidOf(busyGPU), nvmlfake.Telemetry{GPUUtilization: 87, MemoryUtilization: 40,
		MemoryUsedBytes: 10 << 30, TemperatureC: ptr.To[uint32](61), PowerMilliwatts: ptr.To[uint32](352000)}); err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.SetTelemetry(dir, migUUID, nvmlfake.Telemetry{MemoryUsedBytes: 3 << 30}); err != nil {
		t.Fatal(err)
	}

	claimOf := func(name, pod string) []string {
		return []string{"namespace=default", "claim=" + name, "pod=" + pod}
	}
	var s map[string]float64
	waitFor(t, "the busy GPU's utilization", func() bool {
		s = samples(t, reg)
		v, ok := find(t, s, plugin.MetricDeviceUtilization.Name, append(claimOf("busy", "pod-busy"), "device="+busyGPU)...)
		return ok && v == 0.87
	})
	for _, tc := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{plugin.MetricDeviceMemoryUsed.Name, []string{"device=" + busyGPU, "claim=busy"}, 10 << 30},
		{plugin.MetricDeviceMemUtil.Name, []string{"device=" + busyGPU}, 0.40},
		{plugin.MetricDeviceTemperature.Name, []string{"device=" + busyGPU}, 61},
		{plugin.MetricDevicePower.Name, []string{"device=" + busyGPU}, 352},
		{plugin.MetricDeviceUtilization.Name, append(claimOf("quiet", "pod-quiet"), "device="+idleGPU), 0},
		{plugin.MetricDeviceMemoryUsed.Name, append(claimOf("small", "pod-small"), "device="+migDevice), 3 << 30},
		{plugin.MetricPreparedClaims.Name, nil, 3},
		{plugin.MetricPreparedDevices.Name, []string{"type=gpu", "access=exclusive"}, 2},
		{plugin.MetricPreparedDevices.Name, []string{"type=mig", "access=exclusive"}, 1},
		{plugin.MetricRequests.Name, []string{"operation=prepare", "result=success"}, 3},
		{plugin.MetricMigCreated.Name, nil, 1},
		{plugin.MetricClaimsIdle.Name, nil, 1}, // quiet; busy is busy, small is a MIG device (unknown)
	} {
		got, ok := find(t, s, tc.metric, tc.labels...)
		if tc.metric == plugin.MetricClaimsIdle.Name && (!ok || got != tc.want) {
			waitFor(t, "the quiet claim to count as idle", func() bool {
				s = samples(t, reg)
				got, ok = find(t, s, tc.metric, tc.labels...)
				return ok && got == tc.want
			})
		}
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.metric, tc.labels, got, ok, tc.want)
		}
		// Every series carries the node.
		if ok {
			if _, withNode := find(t, s, tc.metric, append(tc.labels, "node=gpu-node")...); !withNode {
				t.Errorf("%s%v has no node label", tc.metric, tc.labels)
			}
		}
	}
	// A 1g.10gb's memory is its GPU instance's (9984 MiB on an H100 80GB),
	// not the GPU's.
	if v, _ := find(t, s, plugin.MetricDeviceMemoryTotal.Name, "device="+migDevice); v < 9<<30 || v > 10<<30 {
		t.Errorf("%s of %s = %v, want the 1g.10gb instance's memory", plugin.MetricDeviceMemoryTotal.Name, migDevice, v)
	}
	// NVML reports no utilization for a MIG device, nor for a GPU in MIG
	// mode: no series rather than a made-up 0.
	parent, _ := node.MigDeviceByName(migDevice)
	if v, ok := find(t, s, plugin.MetricDeviceUtilization.Name, "device="+migDevice); ok {
		t.Errorf("a MIG device reports utilization %v", v)
	}
	if v, ok := find(t, s, plugin.MetricDeviceUtilization.Name, "device="+parent.Parent.DeviceName()); ok {
		t.Errorf("a GPU in MIG mode reports utilization %v", v)
	}
	if _, ok := find(t, s, plugin.MetricClaimIdleSeconds.Name, "claim=small"); ok {
		t.Error("a MIG claim has an idle time though its utilization is unknown")
	}
	if v, _ := find(t, s, plugin.MetricClaimIdleSeconds.Name, "claim=busy"); v != 0 {
		t.Errorf("the busy claim is idle for %vs", v)
	}
	// A free GPU is exported without a claim.
	free := ""
	for _, g := range node.GPUs {
		if d := g.DeviceName(); d != busyGPU && d != idleGPU && d != parent.Parent.DeviceName() {
			free = d
			break
		}
	}
	if _, ok := find(t, s, plugin.MetricDeviceUtilization.Name, "device="+free, "claim=", "pod="); !ok {
		t.Errorf("free GPU %s has no utilization series without a claim", free)
	}

	// The busy claim goes idle: its idle time starts then, not at prepare.
	if err := nvmlfake.SetTelemetry(dir, uuidOf(busyGPU), nvmlfake.Telemetry{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both claims idle", func() bool {
		v, _ := find(t, samples(t, reg), plugin.MetricClaimsIdle.Name)
		return v == 2
	})

	// Releasing the MIG claim destroys its instance.
	if err := c.StopPod(ctx, small); err != nil {
		t.Fatal(err)
	}
	s = samples(t, reg)
	if v, _ := find(t, s, plugin.MetricMigDestroyed.Name); v != 1 {
		t.Errorf("%s = %v, want 1", plugin.MetricMigDestroyed.Name, v)
	}
	if v, _ := find(t, s, plugin.MetricRequests.Name, "operation=unprepare", "result=success"); v != 1 {
		t.Errorf("unprepare requests = %v, want 1", v)
	}
	if v, _ := find(t, s, plugin.MetricPreparedClaims.Name); v != 2 {
		t.Errorf("prepared claims after one release = %v, want 2", v)
	}
}
