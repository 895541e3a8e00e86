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

package simulate

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/plugin"
)

// TestPluginMetrics: the plugin exports each GPU's use as the fake reports
// it, labelled with the claim holding the GPU and its pod; MIG devices with
// their memory (NVML reports no utilization for them); the requests it
// served; MIG instances made and destroyed; and which claims are idle.
func TestPluginMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Profile: "dgx-h100", NodeName: "gpu-node",
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
	var s gpudratest.Samples
	waitFor(t, "the busy GPU's utilization", func() bool {
		s = gpudratest.Gather(t, reg)
		v, ok := s.Value(t, plugin.MetricDeviceUtilization.Name, append(claimOf("busy", "pod-busy"), "device="+busyGPU)...)
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
		got, ok := s.Value(t, tc.metric, tc.labels...)
		if tc.metric == plugin.MetricClaimsIdle.Name && (!ok || got != tc.want) {
			waitFor(t, "the quiet claim to count as idle", func() bool {
				s = gpudratest.Gather(t, reg)
				got, ok = s.Value(t, tc.metric, tc.labels...)
				return ok && got == tc.want
			})
		}
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.metric, tc.labels, got, ok, tc.want)
		}
		// Every series carries the node.
		if ok {
			if _, withNode := s.Value(t, tc.metric, append(tc.labels, "node=gpu-node")...); !withNode {
				t.Errorf("%s%v has no node label", tc.metric, tc.labels)
			}
		}
	}
	// A 1g.10gb's memory is its GPU instance's (9984 MiB on an H100 80GB),
	// not the GPU's.
	if v, _ := s.Value(t, plugin.MetricDeviceMemoryTotal.Name, "device="+migDevice); v < 9<<30 || v > 10<<30 {
		t.Errorf("%s of %s = %v, want the 1g.10gb instance's memory", plugin.MetricDeviceMemoryTotal.Name, migDevice, v)
	}
	// NVML reports no utilization for a MIG device, nor for a GPU in MIG
	// mode: no series rather than a made-up 0.
	parent, _ := node.MigDeviceByName(migDevice)
	if v, ok := s.Value(t, plugin.MetricDeviceUtilization.Name, "device="+migDevice); ok {
		t.Errorf("a MIG device reports utilization %v", v)
	}
	if v, ok := s.Value(t, plugin.MetricDeviceUtilization.Name, "device="+parent.Parent.DeviceName()); ok {
		t.Errorf("a GPU in MIG mode reports utilization %v", v)
	}
	if _, ok := s.Value(t, plugin.MetricClaimIdleSeconds.Name, "claim=small"); ok {
		t.Error("a MIG claim has an idle time though its utilization is unknown")
	}
	if v, _ := s.Value(t, plugin.MetricClaimIdleSeconds.Name, "claim=busy"); v != 0 {
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
	if _, ok := s.Value(t, plugin.MetricDeviceUtilization.Name, "device="+free, "claim=", "pod="); !ok {
		t.Errorf("free GPU %s has no utilization series without a claim", free)
	}

	// The busy claim goes idle: its idle time starts then, not at prepare.
	if err := nvmlfake.SetTelemetry(dir, uuidOf(busyGPU), nvmlfake.Telemetry{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both claims idle", func() bool {
		v, _ := gpudratest.Gather(t, reg).Value(t, plugin.MetricClaimsIdle.Name)
		return v == 2
	})

	// Releasing the MIG claim destroys its instance.
	if err := c.StopPod(ctx, small); err != nil {
		t.Fatal(err)
	}
	s = gpudratest.Gather(t, reg)
	if v, _ := s.Value(t, plugin.MetricMigDestroyed.Name); v != 1 {
		t.Errorf("%s = %v, want 1", plugin.MetricMigDestroyed.Name, v)
	}
	if v, _ := s.Value(t, plugin.MetricRequests.Name, "operation=unprepare", "result=success"); v != 1 {
		t.Errorf("unprepare requests = %v, want 1", v)
	}
	if v, _ := s.Value(t, plugin.MetricPreparedClaims.Name); v != 2 {
		t.Errorf("prepared claims after one release = %v, want 2", v)
	}
}

// infoSeries returns the label sets of every gpudra_device_info series.
func infoSeries(t *testing.T, reg prometheus.Gatherer) []map[string]string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, f := range families {
		if f.GetName() != plugin.MetricDeviceInfo.Name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("%s has value %v, want 1", f.GetName(), m.GetGauge().GetValue())
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, labels)
		}
	}
	return out
}

// infoOf returns the gpudra_device_info series of the device (and claim,
// when given); it fails unless there is exactly one.
func infoOf(t *testing.T, series []map[string]string, device, claim string) map[string]string {
	t.Helper()
	var hits []map[string]string
	for _, s := range series {
		if s["device"] == device && (claim == "" || s["claim"] == claim) {
			hits = append(hits, s)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("%d %s series of device %s (claim %q), want 1: %v", len(hits), plugin.MetricDeviceInfo.Name, device, claim, hits)
	}
	return hits[0]
}

// TestDeviceInfo: gpudra_device_info has one series per GPU and per
// prepared MIG device, with who holds it and the keys DCGM exporter
// labels its series with: the GPU's UUID (a MIG device's parent's) and
// the GPU instance ID the plugin created.
func TestDeviceInfo(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	applyClasses(ctx, t, c)
	reg := c.Driver.Registry()
	whole, err := createAndRun(ctx, t, c, gpuClaim("train", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	small, err := runClaim(ctx, t, c, migClaim("small", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	node := c.Driver.Node()
	wholeGPU := allocatedDevices(whole)[0]
	migDevice := allocatedDevices(small)[0]
	md, _ := node.MigDeviceByName(migDevice)
	var mig checkpoint.MigDevice
	for _, cl := range c.Driver.State().Claims() {
		for _, d := range cl.Devices {
			if d.Mig != nil {
				mig = *d.Mig
			}
		}
	}
	if mig.GPUInstanceID == nil || mig.UUID == "" {
		t.Fatalf("the MIG claim's checkpoint has no GPU instance: %+v", mig)
	}

	series := infoSeries(t, reg)
	// Every GPU once (none is shared), and the one MIG device.
	if len(series) != len(node.GPUs)+1 {
		t.Errorf("%d series, want one per GPU (%d) and one for the MIG device: %v", len(series), len(node.GPUs), series)
	}
	g, _ := node.GPUByDeviceName(wholeGPU)
	for _, tc := range []struct {
		device string
		want   map[string]string
	}{
		{wholeGPU, map[string]string{"type": "gpu", "uuid": g.UUID, "UUID": g.UUID, "GPU_I_ID": "", "model": g.ProductName,
			"state": "allocated", "namespace": "default", "claim": "train", "pod": "pod-train", "node": "node-1"}},
		{md.Parent.DeviceName(), map[string]string{"type": "gpu", "uuid": md.Parent.UUID, "UUID": md.Parent.UUID, "GPU_I_ID": "",
			"state": "partitioned", "claim": ""}},
		{migDevice, map[string]string{"type": "mig", "uuid": mig.UUID, "UUID": md.Parent.UUID, "GPU_I_ID": strconv.Itoa(*mig.GPUInstanceID),
			"profile": "1g.10gb", "model": md.Parent.ProductName, "state": "allocated", "namespace": "default", "claim": "small", "pod": "pod-small"}},
	} {
		got := infoOf(t, series, tc.device, "")
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q (all: %v)", tc.device, k, got[k], v, got)
			}
		}
	}
	var free gpu.GPU
	for _, g := range node.GPUs {
		if s := infoOf(t, series, g.DeviceName(), ""); s["state"] == "free" {
			free = g
			if s["claim"] != "" || s["pod"] != "" {
				t.Errorf("free %s is labelled with a holder: %v", g.DeviceName(), s)
			}
		}
	}
	if free.UUID == "" {
		t.Fatal("no GPU is free")
	}

	// An XID makes the GPU unhealthy in the map.
	if err := nvmlfake.InjectXID(c.Opts.FakeStateDir(), free.UUID, 79); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sick GPU's state", func() bool {
		return infoOf(t, infoSeries(t, reg), free.DeviceName(), "")["state"] == "unhealthy"
	})

	// Released, the MIG device's series goes and its GPU is free again.
	if err := c.StopPod(ctx, small); err != nil {
		t.Fatal(err)
	}
	series = infoSeries(t, reg)
	for _, s := range series {
		if s["device"] == migDevice {
			t.Errorf("the released MIG device still has a series: %v", s)
		}
	}
	if s := infoOf(t, series, md.Parent.DeviceName(), ""); s["state"] != "free" {
		t.Errorf("after the MIG claim went, %s is %q, want free", md.Parent.DeviceName(), s["state"])
	}
}

// TestDeviceInfoShared: a GPU that two claims share has one series per
// claim, so a join attributes its use to both claims' pods.
func TestDeviceInfoShared(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "TimeSlicing")
	onGPU0 := "device.attributes['gpu.gpudra.io'].minor == 0"
	for _, name := range []string{"half-a", "half-b"} {
		claim := shareClaim(name, "20Gi", "", "")
		claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors(onGPU0)
		if _, err := createAndRun(ctx, t, c, claim); err != nil {
			t.Fatal(err)
		}
	}
	series := infoSeries(t, c.Driver.Registry())
	for _, name := range []string{"half-a", "half-b"} {
		s := infoOf(t, series, "gpu-0", name)
		if s["state"] != "shared" || s["pod"] != "pod-"+name {
			t.Errorf("gpu-0 for claim %s: %v, want state shared, pod pod-%s", name, s, name)
		}
	}
}
