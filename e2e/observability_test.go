//go:build e2e

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

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// The scenarios of gpudra's observability (docs/observability.md): the
// plugin's per-device metrics, health that recovers, stranded GPUs, and
// monitoring pods through admin access. They act on the fake GPUs through
// the fake backend's state directory on the node, which the test process
// reaches at GPUDRA_E2E_FAKE_HOST_DIR (on the local cluster, the node is
// this machine: the chart's fakeStateDir itself).

// fakeHostDir is where the test process reaches the node's fake state.
func (e *env) fakeHostDir(t *testing.T) string {
	t.Helper()
	dir := getenv("GPUDRA_E2E_FAKE_HOST_DIR", e.fakeDir)
	if _, err := os.Stat(filepath.Join(dir, "nvmlfake-state.json")); err != nil {
		t.Fatalf("the fake GPUs' state directory of node %s is not reachable from the test at %s (set GPUDRA_E2E_FAKE_HOST_DIR): %v", e.node, dir, err)
	}
	return dir
}

// pluginMetrics scrapes the ready plugin pod's /metrics.
func (e *env) pluginMetrics(ctx context.Context, t *testing.T) map[string]float64 {
	t.Helper()
	m, err := e.metrics(ctx, e.readyPluginPod(ctx, t), "8080")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pluginUtilization: the utilization the fake GPU is told to report shows
// in the plugin's metrics, labelled with the pod that holds the GPU.
func (e *env) pluginUtilization(ctx context.Context, t *testing.T) {
	dir := e.fakeHostDir(t)
	e.createTemplate(ctx, t, "util-gpu", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("util-gpu", claimRef{name: "gpu", template: "util-gpu"}))
	claim := e.podClaims(ctx, t, "util-gpu")["gpu"]
	dev := e.allocated(ctx, t, claim)[0]
	defer func() {
		_ = nvmlfake.SetTelemetry(dir, dev.uuid, nvmlfake.Telemetry{})
		e.deletePods(ctx, t, "util-gpu")
		_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, "util-gpu", metav1.DeleteOptions{})
	}()

	start := time.Now()
	if err := nvmlfake.SetTelemetry(dir, dev.uuid, nvmlfake.Telemetry{GPUUtilization: 73, MemoryUsedBytes: 12 << 30,
		TemperatureC: ptr.To[uint32](58), PowerMilliwatts: ptr.To[uint32](412000)}); err != nil {
		t.Fatal(err)
	}
	labels := []string{`claim="` + claim.Name + `"`, `pod="util-gpu"`, `namespace="` + testNS + `"`, `device="` + dev.name + `"`, `node="` + e.node + `"`}
	want := map[string]float64{
		"gpudra_device_utilization_ratio":   0.73,
		"gpudra_device_memory_used_bytes":   12 << 30,
		"gpudra_device_temperature_celsius": 58,
		"gpudra_device_power_watts":         412,
	}
	// The plugin samples once per telemetry interval: wait for a scrape
	// that shows the whole of what the fake GPU now reports.
	var m map[string]float64
	differ := func() []string {
		var bad []string
		for name, w := range want {
			if got := sumMetric(m, name, labels...); got != w {
				bad = append(bad, fmt.Sprintf("%s%v = %v, want %v", name, labels, got, w))
			}
		}
		// Readiness follows the published slices, which the prepare of
		// this test's pod changed: it is 1 again once they are stored,
		// so it is waited for, not read from one scrape.
		if got := m["gpudra_plugin_ready"+fmt.Sprintf("{node=%q}", e.node)]; got != 1 {
			bad = append(bad, fmt.Sprintf("gpudra_plugin_ready = %v, want 1", got))
		}
		sort.Strings(bad)
		return bad
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		m = e.pluginMetrics(ctx, t)
		return len(differ()) == 0, nil
	}); err != nil {
		t.Fatalf("the plugin's metrics never showed the telemetry set on %s: %v; last scrape: %s", dev.name, err, strings.Join(differ(), "; "))
	}
	record(t, t.Name()+": utilization set on the fake GPU → in the plugin's metrics", time.Since(start))
	if got := sumMetric(m, "gpudra_plugin_requests_total", `operation="prepare"`, `result="success"`); got < 1 {
		t.Errorf("gpudra_plugin_requests_total{prepare,success} = %v", got)
	}
	// Error counters are exported before the first error (increase() sees
	// it); earlier tests may have counted errors, so only presence is
	// asserted here (internal/plugin checks they start at 0).
	errKey := fmt.Sprintf("gpudra_plugin_requests_total{node=%q,operation=\"prepare\",result=\"error\"}", e.node)
	if v, ok := m[errKey]; !ok {
		t.Errorf("%s is not exported", errKey)
	} else if v != 0 {
		t.Logf("%s = %v: an earlier test saw a prepare fail", errKey, v)
	}
	// The device map: the GPU, its holder, and DCGM exporter's key.
	info := []string{`UUID="` + dev.uuid + `"`, `claim="` + claim.Name + `"`, `pod="util-gpu"`, `state="allocated"`, `type="gpu"`}
	if got := sumMetric(m, "gpudra_device_info", info...); got != 1 {
		t.Errorf("gpudra_device_info%v = %v, want one series", info, got)
	}
}

// podDeviceHealth returns the health the pod's status reports for the
// device (KEP-4680), "" while it reports none.
func (e *env) podDeviceHealth(ctx context.Context, pod, device string) (string, error) {
	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				// The kubelet names a device by its first CDI device ID
				// (<vendor>/<class>=<claim UID>-<device>) or, without
				// one, <driver>/<pool>/<device>.
				id := string(r.ResourceID)
				if strings.HasSuffix(id, "/"+device) || strings.HasSuffix(id, "-"+device) {
					return string(r.Health), nil
				}
			}
		}
	}
	return "", nil
}

// taintedDevices lists the devices of the node's slices with the health
// taint.
func (e *env) taintedDevices(ctx context.Context) (map[string]bool, error) {
	sl, err := e.slices(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			for _, t := range d.Taints {
				if t.Key == e.driver+"/unhealthy" {
					out[d.Name] = true
				}
			}
		}
	}
	return out, nil
}

// xidTaintAndRecovery: a critical XID on a GPU a pod uses taints it (new
// pods get other GPUs; eight GPUs no longer fit on the node) and the pod's
// status says the device is unhealthy; a GPU reset clears both without a
// plugin restart.
func (e *env) xidTaintAndRecovery(ctx context.Context, t *testing.T) {
	dir := e.fakeHostDir(t)
	e.createTemplate(ctx, t, "xid-victim", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("xid-victim", claimRef{name: "gpu", template: "xid-victim"}))
	dev := e.allocated(ctx, t, e.podClaims(ctx, t, "xid-victim")["gpu"])[0]
	pluginBefore := e.readyPluginPod(ctx, t)
	defer func() {
		_ = nvmlfake.ResetGPU(dir, dev.uuid)
		e.deletePods(ctx, t, "xid-victim", "xid-seven", "xid-eight")
		for _, n := range []string{"xid-victim", "xid-seven", "xid-eight"} {
			_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, n, metav1.DeleteOptions{})
		}
	}()

	start := time.Now()
	if err := nvmlfake.InjectXID(dir, dev.uuid, 48); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		tainted, err := e.taintedDevices(ctx)
		return tainted[dev.name], err
	}); err != nil {
		t.Fatalf("XID 48 on %s: no taint: %v", dev.name, err)
	}
	record(t, t.Name()+": XID → device tainted", time.Since(start))
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		h, err := e.podDeviceHealth(ctx, "xid-victim", dev.name)
		return h == string(v1.ResourceHealthStatusUnhealthy), err
	}); err != nil {
		t.Errorf("the pod's status does not report %s unhealthy: %v", dev.name, err)
	}
	record(t, t.Name()+": XID → pod status reports the device unhealthy", time.Since(start))

	// The node has 8 GPUs: the victim holds one and it is tainted, so a
	// pod asking for seven gets the other seven, one asking for eight
	// waits.
	e.createTemplate(ctx, t, "xid-seven", e.gpuRequest(7))
	e.startPod(ctx, t, e.gpuPod("xid-seven", claimRef{name: "gpu", template: "xid-seven"}))
	for _, d := range e.allocated(ctx, t, e.podClaims(ctx, t, "xid-seven")["gpu"]) {
		if d.name == dev.name {
			t.Errorf("a new pod got the tainted %s", d.name)
		}
	}
	e.deletePods(ctx, t, "xid-seven")

	// The GPU is reset: the taint goes and the pod's status says healthy,
	// with the same plugin pod.
	start = time.Now()
	if err := nvmlfake.ResetGPU(dir, dev.uuid); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		tainted, err := e.taintedDevices(ctx)
		return err == nil && !tainted[dev.name], err
	}); err != nil {
		t.Fatalf("after a GPU reset, %s is still tainted: %v", dev.name, err)
	}
	record(t, t.Name()+": GPU reset → taint gone", time.Since(start))
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		h, err := e.podDeviceHealth(ctx, "xid-victim", dev.name)
		return h == string(v1.ResourceHealthStatusHealthy), err
	}); err != nil {
		t.Errorf("after the reset the pod's status does not report %s healthy: %v", dev.name, err)
	}
	if p := e.readyPluginPod(ctx, t); p.UID != pluginBefore.UID {
		t.Errorf("the plugin pod was replaced (%s → %s): recovery must not need a restart", pluginBefore.Name, p.Name)
	}
}

// strandedGPUs builds a stranded case on purpose: one GPU in use, a pod
// waiting for all eight on one NVLink island. The seven free GPUs are
// stranded and the pod unsatisfiable; once the first pod goes, the waiting
// pod runs and nothing is stranded.
func (e *env) strandedGPUs(ctx context.Context, t *testing.T) {
	node := fmt.Sprintf(`node=%q`, e.node)
	e.createTemplate(ctx, t, "strand-one", e.gpuRequest(1))
	e.createTemplate(ctx, t, "strand-eight", e.gpuRequest(8))
	defer func() {
		e.deletePods(ctx, t, "strand-one", "strand-eight")
		for _, n := range []string{"strand-one", "strand-eight"} {
			_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, n, metav1.DeleteOptions{})
		}
	}()
	e.startPod(ctx, t, e.gpuPod("strand-one", claimRef{name: "gpu", template: "strand-one"}))
	start := time.Now()
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, e.gpuPod("strand-eight", claimRef{name: "gpu", template: "strand-eight"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, m = e.leader(ctx, t)
		return sumMetric(m, "gpudra_gpus_stranded", node) == 7 && m["gpudra_pods_unsatisfiable"] == 1, nil
	}); err != nil {
		t.Fatalf("stranded %v, unsatisfiable %v; want 7 and 1: %v", sumMetric(m, "gpudra_gpus_stranded", node), m["gpudra_pods_unsatisfiable"], err)
	}
	record(t, t.Name()+": pod waiting → 7 stranded GPUs in the metrics", time.Since(start))

	e.deletePods(ctx, t, "strand-one")
	e.waitRunning(ctx, t, "strand-eight")
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, m = e.leader(ctx, t)
		return sumMetric(m, "gpudra_gpus_stranded", node) == 0 && m["gpudra_pods_unsatisfiable"] == 0 && m["gpudra_pods_pending"] == 0, nil
	}); err != nil {
		t.Errorf("after the pod ran: stranded %v, unsatisfiable %v: %v", sumMetric(m, "gpudra_gpus_stranded", node), m["gpudra_pods_unsatisfiable"], err)
	}
}

// monitoringAdminAccess: with a GPU in use, a monitoring pod asks for every
// GPU with admin access through gpu-monitoring.gpudra.io, runs, and sees all
// of them; without admin access a monitoring device is refused.
func (e *env) monitoringAdminAccess(ctx context.Context, t *testing.T) {
	// Admin access is for namespaces an admin labelled.
	const adminLabel = "resource.kubernetes.io/admin-access"
	setLabel := func(on bool) {
		ns, err := e.cs.CoreV1().Namespaces().Get(ctx, testNS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if on {
			ns.Labels[adminLabel] = "true"
		} else {
			delete(ns.Labels, adminLabel)
		}
		if _, err := e.cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabel(true)
	defer setLabel(false)
	monitorSpec := func(admin bool, all bool) resourceapi.ResourceClaimSpec {
		req := resourceapi.ExactDeviceRequest{DeviceClassName: monitoringClassName(e.driver)}
		if all {
			req.AllocationMode = resourceapi.DeviceAllocationModeAll
		} else {
			req.AllocationMode, req.Count = resourceapi.DeviceAllocationModeExactCount, 1
		}
		if admin {
			req.AdminAccess = ptr.To(true)
		}
		// Monitoring devices carry a NoSchedule taint that only
		// monitoring requests tolerate.
		req.Tolerations = []resourceapi.DeviceToleration{{Key: e.driver + "/monitoring-only", Operator: resourceapi.DeviceTolerationOpExists}}
		return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}}
	}
	e.createTemplate(ctx, t, "mon-workload", e.gpuRequest(1))
	e.createTemplate(ctx, t, "mon-dcgm", monitorSpec(true, true))
	e.createTemplate(ctx, t, "mon-sneaky", monitorSpec(false, false))
	defer func() {
		e.deletePods(ctx, t, "mon-workload", "mon-dcgm", "mon-sneaky")
		for _, n := range []string{"mon-workload", "mon-dcgm", "mon-sneaky"} {
			_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, n, metav1.DeleteOptions{})
		}
	}()
	e.startPod(ctx, t, e.gpuPod("mon-workload", claimRef{name: "gpu", template: "mon-workload"}))
	e.startPod(ctx, t, e.gpuPod("mon-dcgm", claimRef{name: "gpu", template: "mon-dcgm"}))
	seen := e.whatPodSees(ctx, t, "mon-dcgm").fakeGPUs()
	var gpus []string
	for name, d := range e.devicesByName(ctx, t) {
		if strings.HasPrefix(name, "gpu-") && !strings.Contains(name, "-mig-") && !strings.HasSuffix(name, "-monitor") {
			gpus = append(gpus, name)
			if seen[fmt.Sprint(d.minor)] != d.uuid {
				t.Errorf("the monitoring pod does not see GPU %s (%s); it sees %v", name, d.uuid, seen)
			}
		}
	}
	if len(seen) != len(gpus) {
		t.Errorf("the monitoring pod sees %d GPUs, the node has %d", len(seen), len(gpus))
	}

	// Without admin access: allocated (the scheduler cannot tell), refused
	// at prepare with the fix.
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, e.gpuPod("mon-sneaky", claimRef{name: "gpu", template: "mon-sneaky"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := e.eventsFor(ctx, "Pod", "mon-sneaky")
		for _, ev := range evs {
			if strings.Contains(ev, "is for monitoring only") {
				return true, nil
			}
		}
		return false, err
	}); err != nil {
		evs, _ := e.eventsFor(ctx, "Pod", "mon-sneaky")
		t.Errorf("a monitoring device without admin access was not refused with its reason: %v; events %q", err, evs)
	}
}

// monitoringClassName is the chart's monitoring DeviceClass for the driver
// (gpu-monitoring.gpudra.io for the default driver name).
func monitoringClassName(driver string) string {
	if driver == "gpu.gpudra.io" {
		return "gpu-monitoring.gpudra.io"
	}
	return "gpu-monitoring." + driver
}
