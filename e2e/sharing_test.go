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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Sharing scenarios (docs/sharing.md). They run on a node pool with
// consumable capacity: the first one to run upgrades the release with
// consumableCapacity.enabled (shares use MPS unless a claim says
// otherwise), which the scenarios after them keep.

const (
	mpsClassName = "mps.gpudra.io"         // deviceclasses/sharing.yaml
	tsClassName  = "timeslicing.gpudra.io" // deviceclasses/sharing.yaml
	daemonLabel  = "app.kubernetes.io/component=mps-control-daemon"
)

// mpsScript prints what an MPS client sees besides the GPU: the pipe
// directory's identity (device:inode, the same in every client of one
// daemon) and what is in it.
const mpsScript = `env | sort; echo "DEVICES: $(ls /dev | grep '^nvidia' | tr '\n' ' ')"; ` +
	`echo "MPS_PIPE_DIR=$(stat -c %d:%i /tmp/nvidia-mps)"; echo "MPS_PIPE_FILES=$(ls /tmp/nvidia-mps | tr '\n' ' ')"; echo READY; exec sleep 3600`

// ensureSharedPool turns consumable capacity on for the release, once.
func (e *env) ensureSharedPool(ctx context.Context, t *testing.T) {
	t.Helper()
	if e.sharedSlices(ctx, t) {
		return
	}
	start := time.Now()
	old := e.readyPluginPod(ctx, t)
	args := e.helmArgs(append(append([]string{"upgrade", releaseName, e.chart, "-n", systemNS, "--wait", "--timeout", "3m"}, e.chartValues()...),
		"--set", "consumableCapacity.enabled=true")...)
	if _, err := run(ctx, e.helm, args...); err != nil {
		t.Fatal(err)
	}
	e.readyPluginPod(ctx, t, string(old.UID))
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) { return e.sharedSlices(ctx, t), nil }); err != nil {
		t.Fatalf("the plugin does not publish shareable GPUs: %v", err)
	}
	record(t, "helm upgrade with consumableCapacity.enabled → shareable GPUs published", time.Since(start))
}

// sharedSlices reports whether every whole GPU of the node allows
// multiple allocations.
func (e *env) sharedSlices(ctx context.Context, t *testing.T) bool {
	t.Helper()
	sl, err := e.slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			if ptr.Deref(d.Attributes["type"].StringValue, "") == "gpu" {
				if !ptr.Deref(d.AllowMultipleAllocations, false) {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

// shareRequest is a claim spec for one share of a GPU of the class, with
// an optional GpuConfig sharing section and extra selectors.
func (e *env) shareRequest(class, memory, sharing string, selectors ...string) resourceapi.ResourceClaimSpec {
	spec := e.gpuRequest(1, selectors...)
	spec.Devices.Requests[0].Exactly.DeviceClassName = class
	spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
		Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)},
	}
	if sharing != "" {
		spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
			Requests: []string{"gpu"},
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver:     e.driver,
				Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":` + sharing + `}`)},
			}},
		}}
	}
	return spec
}

func (e *env) mpsPod(name, template string) *v1.Pod {
	pod := e.gpuPod(name, claimRef{name: "gpu", template: template})
	pod.Spec.Containers[0].Command = []string{"sh", "-c", mpsScript}
	return pod
}

// daemonPods lists the MPS daemon pods on the node.
func (e *env) daemonPods(ctx context.Context, t *testing.T) []v1.Pod {
	t.Helper()
	list, err := e.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: daemonLabel})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == e.node && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) waitDaemonPods(ctx context.Context, t *testing.T, want int, why string) {
	t.Helper()
	var got []v1.Pod
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		got = e.daemonPods(ctx, t)
		return len(got) == want, nil
	}); err != nil {
		t.Errorf("%s: %d MPS daemon pods, want %d", why, len(got), want)
	}
}

// fakeGPUPolicy reads a GPU's compute mode and time slice from the fake
// backend's state on the node.
func (e *env) fakeGPUPolicy(ctx context.Context, t *testing.T, uuid string) (computeMode, timeSlice int) {
	t.Helper()
	out, err := e.kubectlRun(ctx, "-n", testNS, "exec", inspectorPod, "--", "cat", "/host/fake/nvmlfake-state.json")
	if err != nil {
		t.Fatalf("read the fake state on the node: %v", err)
	}
	var st struct {
		GPUs map[string]struct {
			ComputeMode int `json:"computeMode"`
			TimeSlice   int `json:"timeSlice"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	g := st.GPUs[uuid]
	return g.ComputeMode, g.TimeSlice
}

// mpsTwoPods: two pods share a GPU through MPS: one daemon pod, the same
// pipe directory (with the daemon's control socket) in both, each pod its
// own limits, the GPU in exclusive-process mode. The plugin is restarted
// with both running: the daemon pod is adopted, not replaced, and neither
// client is disturbed. When both pods go, so do the daemon and the compute
// mode.
func (e *env) mpsTwoPods(ctx context.Context, t *testing.T) {
	e.ensureSharedPool(ctx, t)
	e.createTemplate(ctx, t, "mps-half", e.shareRequest(mpsClassName, "20Gi", `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50}}`))
	e.createTemplate(ctx, t, "mps-quarter", e.shareRequest(mpsClassName, "10Gi", `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":25}}`))
	e.startPod(ctx, t, e.mpsPod("mps-a", "mps-half")) // starts the daemon pod
	e.startPod(ctx, t, e.mpsPod("mps-b", "mps-quarter"))
	defer e.deletePods(ctx, t, "mps-a", "mps-b")
	da := e.allocated(ctx, t, e.podClaims(ctx, t, "mps-a")["gpu"])
	db := e.allocated(ctx, t, e.podClaims(ctx, t, "mps-b")["gpu"])
	if da[0].name != db[0].name {
		t.Fatalf("the MPS pods got %s and %s, want shares of one GPU", da[0].name, db[0].name)
	}
	sa, sb := e.whatPodSees(ctx, t, "mps-a"), e.whatPodSees(ctx, t, "mps-b")
	assertSees(t, "mps-a", sa, da)
	assertSees(t, "mps-b", sb, db)
	for _, c := range []struct {
		pod             string
		s               seen
		threads, pinned string
	}{{"mps-a", sa, "50", "0=20480M"}, {"mps-b", sb, "25", "0=10240M"}} {
		if got := c.s.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]; got != c.threads {
			t.Errorf("pod %s: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%q, want %s", c.pod, got, c.threads)
		}
		if got := c.s.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]; got != c.pinned {
			t.Errorf("pod %s: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%q, want %s (its memory share)", c.pod, got, c.pinned)
		}
		if got := c.s.env["CUDA_MPS_PIPE_DIRECTORY"]; got != "/tmp/nvidia-mps" {
			t.Errorf("pod %s: CUDA_MPS_PIPE_DIRECTORY=%q", c.pod, got)
		}
		if !strings.Contains(c.s.env["MPS_PIPE_FILES"], "control") {
			t.Errorf("pod %s: the pipe directory holds %q, no control socket", c.pod, c.s.env["MPS_PIPE_FILES"])
		}
	}
	if sa.env["MPS_PIPE_DIR"] == "" || sa.env["MPS_PIPE_DIR"] != sb.env["MPS_PIPE_DIR"] {
		t.Errorf("the pods see different pipe directories: %q and %q", sa.env["MPS_PIPE_DIR"], sb.env["MPS_PIPE_DIR"])
	}
	daemons := e.daemonPods(ctx, t)
	if len(daemons) != 1 {
		t.Fatalf("%d MPS daemon pods for one shared GPU, want 1", len(daemons))
	}
	daemon := daemons[0]
	if mode, _ := e.fakeGPUPolicy(ctx, t, da[0].uuid); mode != 3 {
		t.Errorf("compute mode %d with MPS, want 3 (exclusive process)", mode)
	}
	t.Logf("pods share %s through daemon pod %s; pipe directory %s", da[0].name, daemon.Name, sa.env["MPS_PIPE_DIR"])
	e.daemonPodPolicy(ctx, t, daemon)

	// The plugin restarts with both clients running.
	before := map[string]running{"mps-a": e.runningState(ctx, t, "mps-a"), "mps-b": e.runningState(ctx, t, "mps-b")}
	old := e.readyPluginPod(ctx, t)
	start := time.Now()
	if err := e.cs.CoreV1().Pods(systemNS).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.readyPluginPod(ctx, t, string(old.UID))
	record(t, t.Name()+": plugin pod deleted → new plugin Ready (daemon adopted)", time.Since(start))
	after := e.daemonPods(ctx, t)
	if len(after) != 1 || after[0].UID != daemon.UID || restarts(after[0]) != restarts(daemon) {
		t.Errorf("the daemon pod did not survive the plugin restart: before %s (%s, %d restarts), after %v", daemon.Name, daemon.UID, restarts(daemon), podNames(after))
	}
	for name, b := range before {
		if got := e.runningState(ctx, t, name); got != b {
			t.Errorf("pod %s was disturbed by the plugin restart: %+v, before %+v", name, got, b)
		}
	}

	start = time.Now()
	e.deletePods(ctx, t, "mps-a", "mps-b")
	e.waitDaemonPods(ctx, t, 0, "after both clients are gone")
	record(t, t.Name()+": both MPS pods deleted → daemon pod gone", time.Since(start))
	if mode, _ := e.fakeGPUPolicy(ctx, t, da[0].uuid); mode != 0 {
		t.Errorf("compute mode %d after the daemon stopped, want 0 (default)", mode)
	}
}

// daemonPodPolicy: the plugin's ServiceAccount, on its node, may create a
// pod shaped like its MPS daemon pods there, and nothing else: not on
// another node, not with another image, not privileged (the fake backend's
// daemon needs no privilege), not a pod that is no daemon (dry-run creates,
// as the ServiceAccount with the node bound into its credentials).
func (e *env) daemonPodPolicy(ctx context.Context, t *testing.T, daemon v1.Pod) {
	t.Helper()
	plugin := e.readyPluginPod(ctx, t)
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + systemNS + ":" + plugin.Spec.ServiceAccountName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNS, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {e.node}},
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	like := func(edit func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-policy-", Namespace: systemNS, Labels: daemon.Labels}, Spec: *daemon.Spec.DeepCopy()}
		edit(p)
		return p
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := sa.CoreV1().Pods(systemNS).Create(ctx, like(func(*v1.Pod) {}), dry); err != nil {
		t.Errorf("the plugin may not create its own daemon pod: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(*v1.Pod)
	}{
		{"on another node", "may not create or delete pods of node other-node", func(p *v1.Pod) { p.Spec.NodeName = "other-node" }},
		{"with another image", "an MPS control daemon pod runs the plugin's image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "docker.io/library/busybox" }},
		{"privileged", "unprivileged", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true)}
		}},
		{"that is no daemon", "may only create and delete its MPS control daemon pods", func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "miner"}
		}},
	} {
		_, err := sa.CoreV1().Pods(systemNS).Create(ctx, like(c.edit), dry)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a pod %s: got %v, want a denial saying %q", c.name, err, c.want)
		}
	}
}

func restarts(p v1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func podNames(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s (%s)", p.Name, p.UID))
	}
	return out
}

// consumableCapacityPacking: 39Gi shares are packed onto one GPU up to its
// memory (an H100's 81559 MiB holds two), each with its share as its MPS
// pinned memory limit; a third confined to that GPU stays Pending with the
// scheduler's reason.
func (e *env) consumableCapacityPacking(ctx context.Context, t *testing.T) {
	e.ensureSharedPool(ctx, t)
	last := fmt.Sprintf("device.attributes['%s'].minor == 7", e.driver)
	e.createTemplate(ctx, t, "share-39gi", e.shareRequest(e.driver, "39Gi", "", last))
	e.startPod(ctx, t, e.gpuPod("pack-a", claimRef{name: "gpu", template: "share-39gi"}))
	e.startPod(ctx, t, e.gpuPod("pack-b", claimRef{name: "gpu", template: "share-39gi"}))
	defer e.deletePods(ctx, t, "pack-a", "pack-b", "pack-c")
	for _, p := range []string{"pack-a", "pack-b"} {
		devs := e.allocated(ctx, t, e.podClaims(ctx, t, p)["gpu"])
		s := e.whatPodSees(ctx, t, p)
		assertSees(t, p, s, devs)
		if devs[0].minor != 7 {
			t.Errorf("pod %s got %s, want gpu-7", p, devs[0].name)
		}
		// The pool's default sharing is MPS: the share is enforced.
		if got := s.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]; got != "0=39936M" {
			t.Errorf("pod %s: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%q, want its 39Gi share", p, got)
		}
	}
	start := time.Now()
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, e.gpuPod("pack-c", claimRef{name: "gpu", template: "share-39gi"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := e.waitUnschedulable(ctx, t, "pack-c")
	record(t, t.Name()+": third share create → Unschedulable", time.Since(start))
	t.Logf("scheduler: %s", msg)
}

// timeSlicingShare: two time-sliced pods share one GPU, whose time slice is
// set to Long while they run and back to the default once they are gone.
func (e *env) timeSlicingShare(ctx context.Context, t *testing.T) {
	e.ensureSharedPool(ctx, t)
	e.createTemplate(ctx, t, "ts-long", e.shareRequest(tsClassName, "10Gi", `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}`))
	e.startPod(ctx, t, e.gpuPod("ts-a", claimRef{name: "gpu", template: "ts-long"}))
	e.startPod(ctx, t, e.gpuPod("ts-b", claimRef{name: "gpu", template: "ts-long"}))
	defer e.deletePods(ctx, t, "ts-a", "ts-b")
	da := e.allocated(ctx, t, e.podClaims(ctx, t, "ts-a")["gpu"])
	db := e.allocated(ctx, t, e.podClaims(ctx, t, "ts-b")["gpu"])
	if da[0].name != db[0].name {
		t.Fatalf("the time-sliced pods got %s and %s, want one GPU", da[0].name, db[0].name)
	}
	assertSees(t, "ts-a", e.whatPodSees(ctx, t, "ts-a"), da)
	assertSees(t, "ts-b", e.whatPodSees(ctx, t, "ts-b"), db)
	if mode, ts := e.fakeGPUPolicy(ctx, t, da[0].uuid); ts != 3 || mode != 0 {
		t.Errorf("GPU %s: time slice %d, compute mode %d; want 3 (long) and 0", da[0].name, ts, mode)
	}
	if n := len(e.daemonPods(ctx, t)); n != 0 {
		t.Errorf("%d MPS daemon pods for time-sliced pods", n)
	}
	e.deletePods(ctx, t, "ts-a", "ts-b")
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, ts := e.fakeGPUPolicy(ctx, t, da[0].uuid)
		return ts == 0, nil
	}); err != nil {
		t.Errorf("GPU %s keeps its time slice after the pods are gone", da[0].name)
	}
}
