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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	releaseName   = "gpudra-e2e"
	systemNS      = "gpudra-e2e-system" // the chart's namespace
	testNS        = "gpudra-e2e"        // the test pods' namespace
	pluginLabel   = "app.kubernetes.io/component=kubelet-plugin,app.kubernetes.io/instance=" + releaseName
	fakeEnvPrefix = "GPUDRA_FAKE_GPU_"
)

// env is the cluster and tools the suite runs with.
type env struct {
	cfg        *rest.Config
	cs         kubernetes.Interface
	kubeconfig string
	helm       string
	kubectl    string
	values     string // extra values file, may be empty
	chart      string
	image      string
	pullPolicy v1.PullPolicy
	profile    string
	driver     string
	kubeletDir string
	cdiDir     string
	fakeDir    string // the fake backend's state directory on the node
	report     string

	node string // the GPU node (where the plugin runs)
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		kubeconfig: os.Getenv("KUBECONFIG"),
		helm:       getenv("GPUDRA_E2E_HELM", "helm"),
		kubectl:    getenv("GPUDRA_E2E_KUBECTL", "kubectl"),
		values:     os.Getenv("GPUDRA_E2E_VALUES"),
		chart:      getenv("GPUDRA_E2E_CHART", filepath.Join("..", "deployments", "helm", "gpudra")),
		image:      getenv("GPUDRA_E2E_TEST_IMAGE", "localhost/busybox:e2e"),
		pullPolicy: v1.PullPolicy(getenv("GPUDRA_E2E_PULL_POLICY", "Never")),
		profile:    getenv("GPUDRA_E2E_PROFILE", "dgx-h100"),
		driver:     "gpu.gpudra.io",
		kubeletDir: "/var/lib/kubelet",
		cdiDir:     "/var/run/cdi",
		fakeDir:    "/var/lib/gpudra/fake",
		report:     os.Getenv("GPUDRA_E2E_REPORT"),
	}
	if e.kubeconfig == "" {
		t.Fatal("KUBECONFIG must point at the cluster to test")
	}
	if e.values != "" {
		// The chart values that say where things are on this cluster's nodes.
		data, err := os.ReadFile(e.values)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			DriverName string `json:"driverName"`
			KubeletDir string `json:"kubeletDir"`
			CDIDir     string `json:"cdiDir"`
			FakeDir    string `json:"fakeStateDir"`
		}
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", e.values, err)
		}
		if v.DriverName != "" {
			e.driver = v.DriverName
		}
		if v.KubeletDir != "" {
			e.kubeletDir = v.KubeletDir
		}
		if v.CDIDir != "" {
			e.cdiDir = v.CDIDir
		}
		if v.FakeDir != "" {
			e.fakeDir = v.FakeDir
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	e.cfg = cfg
	e.cs = kubernetes.NewForConfigOrDie(cfg)
	return e
}

// run runs a command and returns its stdout; a failure includes stderr.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (e *env) helmArgs(args ...string) []string {
	return append([]string{"--kubeconfig", e.kubeconfig}, args...)
}

// chartValues are the values every install and upgrade uses.
func (e *env) chartValues() []string {
	args := []string{"--set", "deviceBackend=fake", "--set", "fakeProfile=" + e.profile, "--set", "logVerbosity=4",
		// A namespace labelled skipAdmissionLabel is outside the webhook
		// (controller_test.go).
		"--set", "admissionWebhook.namespaceSelector.matchExpressions[0].key=" + skipAdmissionLabel,
		"--set", "admissionWebhook.namespaceSelector.matchExpressions[0].operator=DoesNotExist",
		// Fleet metrics, device samples and health rechecks follow the
		// cluster within seconds.
		"--set", "controller.recomputeInterval=2s",
		"--set", "metrics.telemetryInterval=2s",
		"--set", "health.recheckInterval=2s"}
	if e.values != "" {
		args = append(args, "-f", e.values)
	}
	return args
}

func (e *env) kubectlRun(ctx context.Context, args ...string) (string, error) {
	return run(ctx, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
}

// poll calls cond every 100 ms until it returns true or the timeout
// passes. An error from cond does not end the wait (the cluster may not be
// there yet); the last one is in the error returned on timeout.
func poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	switch {
	case err == nil:
		return nil
	case last != nil:
		return fmt.Errorf("timed out after %v: %w", timeout, last)
	}
	return fmt.Errorf("timed out after %v", timeout)
}

// ---- timings -------------------------------------------------------------

var (
	timingsMu sync.Mutex
	timings   []string
)

func record(t *testing.T, what string, d time.Duration) {
	t.Helper()
	line := fmt.Sprintf("%-60s %6.2f s", what, d.Seconds())
	t.Log("measured: " + line)
	timingsMu.Lock()
	timings = append(timings, line)
	timingsMu.Unlock()
}

func writeReport(e *env) {
	timingsMu.Lock()
	defer timingsMu.Unlock()
	if len(timings) == 0 {
		return
	}
	text := "gpudra e2e timings (" + time.Now().UTC().Format(time.RFC3339) + ")\n" + strings.Join(timings, "\n") + "\n"
	fmt.Print("\n" + text)
	if e != nil && e.report != "" {
		f, err := os.OpenFile(e.report, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(text)
			_ = f.Close()
		}
	}
}

// ---- pods and claims -----------------------------------------------------

// script prints what the container sees, then sleeps: its environment, the
// GPU device nodes, and a marker.
const script = `env | sort; echo "DEVICES: $(ls /dev | grep '^nvidia' | tr '\n' ' ')"; echo READY; exec sleep 3600`

// claimRef is one pod-level claim: from a template or an existing claim.
type claimRef struct {
	name     string // the pod's name for it
	template string
	claim    string
}

func (e *env) gpuPod(name string, claims ...claimRef) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"gpudra-e2e": "test"}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": e.node},
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name:            "ctr",
				Image:           e.image,
				ImagePullPolicy: e.pullPolicy,
				Command:         []string{"sh", "-c", script},
			}},
		},
	}
	for _, c := range claims {
		pc := v1.PodResourceClaim{Name: c.name}
		if c.template != "" {
			pc.ResourceClaimTemplateName = ptr.To(c.template)
		} else {
			pc.ResourceClaimName = ptr.To(c.claim)
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, pc)
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: c.name})
	}
	return pod
}

// gpuRequest is a claim spec: count GPUs of the driver's class, with
// optional extra CEL selectors.
func (e *env) gpuRequest(count int64, selectors ...string) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{
		Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: e.driver,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           count,
		},
	}
	for _, s := range selectors {
		req.Exactly.Selectors = append(req.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
}

func (e *env) createTemplate(ctx context.Context, t *testing.T, name string, spec resourceapi.ResourceClaimSpec) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}
	if _, err := e.cs.ResourceV1().ResourceClaimTemplates(testNS).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s: %v", name, err)
	}
}

// startPod creates the pod and waits until it runs and has printed what it
// sees; it records create → Running.
func (e *env) startPod(ctx context.Context, t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	start := time.Now()
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	running := e.waitRunning(ctx, t, pod.Name)
	record(t, t.Name()+": pod "+pod.Name+" create → Running", time.Since(start))
	return running
}

func (e *env) waitRunning(ctx context.Context, t *testing.T, name string) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	err := poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		if p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended: %s", name, p.Status.Phase)
		}
		return p.Status.Phase == v1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod %s not Running: %v\n%s", name, err, e.describePod(ctx, name))
	}
	return got
}

// describePod is what a human would look at when a pod does not start.
func (e *env) describePod(ctx context.Context, name string) string {
	out, err := e.kubectlRun(ctx, "-n", testNS, "describe", "pod", name)
	if err != nil {
		return err.Error()
	}
	return out
}

// seen is what a container printed: its environment and GPU device nodes.
type seen struct {
	env     map[string]string
	devices []string
}

// fakeGPUs returns minor → UUID from the GPUDRA_FAKE_GPU_<minor> variables.
func (s seen) fakeGPUs() map[string]string {
	out := map[string]string{}
	for k, v := range s.env {
		if minor, ok := strings.CutPrefix(k, fakeEnvPrefix); ok {
			out[minor] = v
		}
	}
	return out
}

func (e *env) whatPodSees(ctx context.Context, t *testing.T, name string) seen {
	t.Helper()
	return e.whatContainerSees(ctx, t, name, "ctr")
}

// whatContainerSees is whatPodSees for a container of another name.
func (e *env) whatContainerSees(ctx context.Context, t *testing.T, pod, ctr string) seen {
	t.Helper()
	var logs string
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		b, err := e.cs.CoreV1().Pods(testNS).GetLogs(pod, &v1.PodLogOptions{Container: ctr}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		logs = string(b)
		return strings.Contains(logs, "\nREADY"), nil
	})
	if err != nil {
		t.Fatalf("logs of pod %s: %v (got %q)", pod, err, logs)
	}
	return parseSeen(logs)
}

// parseSeen reads what script printed.
func parseSeen(logs string) seen {
	s := seen{env: map[string]string{}}
	for _, line := range strings.Split(logs, "\n") {
		if d, ok := strings.CutPrefix(line, "DEVICES:"); ok {
			s.devices = strings.Fields(d)
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			s.env[k] = v
		}
	}
	return s
}

// device is one allocated device with the attributes the slice published.
type device struct {
	name, uuid string
	minor      int64
	attrs      map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
}

// slices returns the driver's ResourceSlices on the GPU node.
func (e *env) slices(ctx context.Context) ([]resourceapi.ResourceSlice, error) {
	list, err := e.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + e.driver})
	if err != nil {
		return nil, err
	}
	var out []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if e.node == "" || ptr.Deref(s.Spec.NodeName, "") == e.node {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (e *env) devicesByName(ctx context.Context, t *testing.T) map[string]device {
	t.Helper()
	sl, err := e.slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]device{}
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			dev := device{name: d.Name, attrs: d.Attributes, capacity: d.Capacity}
			if a, ok := d.Attributes["uuid"]; ok && a.StringValue != nil {
				dev.uuid = *a.StringValue
			}
			if a, ok := d.Attributes["minor"]; ok && a.IntValue != nil {
				dev.minor = *a.IntValue
			}
			out[d.Name] = dev
		}
	}
	return out
}

// podClaims returns the pod's ResourceClaims by the pod's name for them.
func (e *env) podClaims(ctx context.Context, t *testing.T, pod string) map[string]*resourceapi.ResourceClaim {
	t.Helper()
	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*resourceapi.ResourceClaim{}
	for _, pc := range p.Spec.ResourceClaims {
		name := ptr.Deref(pc.ResourceClaimName, "")
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == pc.Name {
				name = ptr.Deref(st.ResourceClaimName, "")
			}
		}
		if name == "" {
			t.Fatalf("pod %s: claim %s has no ResourceClaim yet", pod, pc.Name)
		}
		c, err := e.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[pc.Name] = c
	}
	return out
}

// allocated returns the devices of this driver allocated to the claim.
func (e *env) allocated(ctx context.Context, t *testing.T, claim *resourceapi.ResourceClaim) []device {
	t.Helper()
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s is not allocated", claim.Name)
	}
	byName := e.devicesByName(ctx, t)
	var out []device
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != e.driver {
			continue
		}
		d, ok := byName[r.Device]
		if !ok {
			t.Fatalf("claim %s: allocated device %s/%s is in no ResourceSlice", claim.Name, r.Pool, r.Device)
		}
		out = append(out, d)
	}
	return out
}

// assertSees checks that the container sees exactly the devices: one
// GPUDRA_FAKE_GPU_<minor>=<uuid> and one /dev/nvidia<minor> each, and no
// other GPU. Visibility is by device nodes; NVIDIA_VISIBLE_DEVICES is void
// (it tells a legacy NVIDIA runtime hook to add nothing).
func assertSees(t *testing.T, pod string, s seen, devs []device) {
	t.Helper()
	got := s.fakeGPUs()
	want := map[string]string{}
	for _, d := range devs {
		want[fmt.Sprint(d.minor)] = d.uuid
	}
	if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
		t.Errorf("pod %s sees GPUs (minor=uuid) %v, want the allocated %v", pod, sortedMap(got), sortedMap(want))
	}
	for _, d := range devs {
		if !contains(s.devices, fmt.Sprintf("nvidia%d", d.minor)) {
			t.Errorf("pod %s: /dev has %v, lacks nvidia%d", pod, s.devices, d.minor)
		}
	}
	for _, dev := range s.devices {
		minor, ok := strings.CutPrefix(dev, "nvidia")
		if ok && minor != "" && minor[0] >= '0' && minor[0] <= '9' && want[minor] == "" {
			t.Errorf("pod %s: /dev has %s, which it was not allocated", pod, dev)
		}
	}
	if v := s.env["NVIDIA_VISIBLE_DEVICES"]; v != "void" {
		t.Errorf("pod %s: NVIDIA_VISIBLE_DEVICES=%q, want void", pod, v)
	}
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deletePods deletes pods and waits until they are gone (the kubelet has
// unprepared their claims by then).
func (e *env) deletePods(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		err := e.cs.CoreV1().Pods(testNS).Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if err := e.waitPodGone(ctx, n); err != nil {
			t.Fatalf("pod %s not gone: %v", n, err)
		}
	}
}

// waitPodGone waits, up to 90 s, until the test pod is gone.
func (e *env) waitPodGone(ctx context.Context, name string) error {
	return poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// ---- the plugin -----------------------------------------------------------

func (e *env) pluginPods(ctx context.Context) ([]v1.Pod, error) {
	list, err := e.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: pluginLabel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// readyPluginPod waits for exactly one Ready plugin pod on the node, other
// than the excluded UIDs, and returns it.
func (e *env) readyPluginPod(ctx context.Context, t *testing.T, exclude ...string) v1.Pod {
	t.Helper()
	var ready v1.Pod
	err := poll(ctx, 120*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := e.pluginPods(ctx)
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			if contains(exclude, string(p.UID)) || p.DeletionTimestamp != nil {
				continue
			}
			if podReady(&p) {
				ready = p
				n++
			}
		}
		return n == 1, nil
	})
	if err != nil {
		t.Fatalf("no ready plugin pod: %v", err)
	}
	return ready
}

// podReady says whether the pod's Ready condition is True.
func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// ---- the node's directories -----------------------------------------------

const inspectorPod = "node-inspector"

// startInspector runs a pod on the GPU node with the host's CDI and kubelet
// plugin directories and the fake backend's state directory mounted read-only, to look at what the driver leaves
// there.
func (e *env) startInspector(ctx context.Context, t *testing.T) {
	t.Helper()
	hp := func(name, path string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: ptr.To(v1.HostPathDirectoryOrCreate)}}}
	}
	pod := e.gpuPod(inspectorPod)
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	pod.Spec.Volumes = []v1.Volume{
		hp("cdi", e.cdiDir),
		hp("plugins", e.kubeletDir+"/plugins"),
		hp("registry", e.kubeletDir+"/plugins_registry"),
		hp("fake", e.fakeDir),
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "cdi", MountPath: "/host/cdi", ReadOnly: true},
		{Name: "plugins", MountPath: "/host/plugins", ReadOnly: true},
		{Name: "registry", MountPath: "/host/registry", ReadOnly: true},
		{Name: "fake", MountPath: "/host/fake", ReadOnly: true},
	}
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRunning(ctx, t, inspectorPod)
}

// hostFiles lists a directory of the node through the inspector pod:
// dir is cdi, plugins/<driver>, registry or fake.
func (e *env) hostFiles(ctx context.Context, t *testing.T, dir string) []string {
	t.Helper()
	out, err := e.kubectlRun(ctx, "-n", testNS, "exec", inspectorPod, "--", "ls", "-1", "/host/"+dir)
	if err != nil {
		t.Fatalf("list %s on the node: %v", dir, err)
	}
	return strings.Fields(out)
}

// cdiSpecsOf returns the plugin's CDI spec files of a claim (all of its
// claim specs, with an empty UID).
func (e *env) cdiSpecsOf(ctx context.Context, t *testing.T, uid string) []string {
	t.Helper()
	return e.claimSpecs(e.hostFiles(ctx, t, "cdi"), uid)
}

// claimSpecs picks, from the names of a node's CDI directory, the
// plugin's specs of the claim (of every claim for uid ""): one per claim;
// the kubelet plugin library writes a device-metadata spec of its own
// next to it (KEP-5304), which is not picked.
func (e *env) claimSpecs(files []string, uid string) []string {
	var out []string
	for _, f := range files {
		if strings.Contains(f, e.driver+"-claim_"+uid) {
			out = append(out, f)
		}
	}
	return out
}

// eventsFor returns "reason: message" of the events about a pod.
func (e *env) eventsFor(ctx context.Context, kind, name string) ([]string, error) {
	list, err := e.cs.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	return out, nil
}
