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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpudra/gpudra/internal/clusterstatus"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// repoRoot is the repository the suite runs from (go test runs in e2e/).
const repoRoot = ".."

// buildVersion is what hack/version.sh says the binaries and the image
// were stamped with.
func buildVersion(t *testing.T, what string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "version.sh"), what).Output()
	if err != nil {
		t.Fatalf("hack/version.sh %s: %v", what, err)
	}
	return strings.TrimSpace(string(out))
}

// buildInfo: the plugin's and the controller's /metrics say which build
// runs, and serve the Go runtime, process and client-go metrics.
func (e *env) buildInfo(ctx context.Context, t *testing.T) {
	version, revision := buildVersion(t, "version"), buildVersion(t, "revision")
	ctrl, err := e.controllerPods(ctx)
	if err != nil || len(ctrl) == 0 {
		t.Fatalf("no running controller pod: %v", err)
	}
	for _, c := range []struct {
		component string
		pod       v1.Pod
	}{{"kubelet-plugin", e.readyPluginPod(ctx, t)}, {"controller", ctrl[0]}} {
		m, err := e.metrics(ctx, c.pod, "8080")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for k, v := range m {
			if strings.HasPrefix(k, "gpudra_build_info{") && v == 1 &&
				strings.Contains(k, `component="`+c.component+`"`) && strings.Contains(k, `version="`+version+`"`) && strings.Contains(k, `revision="`+revision+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no gpudra_build_info{component=%q, version=%q, revision=%q} 1", c.pod.Name, c.component, version, revision)
		}
		for _, prefix := range []string{"go_goroutines", "process_resident_memory_bytes", "rest_client_requests_total{"} {
			if !hasMetric(m, prefix) {
				t.Errorf("%s: no %s…", c.pod.Name, prefix)
			}
		}
	}
}

func hasMetric(m map[string]float64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// deviceStatusOf waits for the plugin's status.devices entry of each of the
// claim's devices and returns their DeviceStatus by device name.
func (e *env) deviceStatusOf(ctx context.Context, t *testing.T, ns, name string) map[string]*configapi.DeviceStatus {
	t.Helper()
	var out map[string]*configapi.DeviceStatus
	var last *resourceapi.ResourceClaim
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		c, err := e.cs.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return false, nil
		}
		last = c
		out = map[string]*configapi.DeviceStatus{}
		for _, d := range c.Status.Devices {
			ready := false
			for _, cond := range d.Conditions {
				ready = ready || cond.Type == "Ready" && cond.Status == metav1.ConditionTrue
			}
			if d.Driver != e.driver || d.Data == nil || !ready {
				continue
			}
			st, err := configapi.DecodeDeviceStatus(d.Data.Raw)
			if err != nil {
				return false, err
			}
			out[d.Device] = st
		}
		return len(out) == len(c.Status.Allocation.Devices.Results), nil
	})
	if err != nil {
		t.Fatalf("claim %s/%s: the plugin's status.devices never covered its allocation: %v\n%+v", ns, name, err, last)
	}
	return out
}

// wholeAndMigPods runs two pods, <prefix>-gpu with a whole GPU and
// <prefix>-mig with a 1g.10gb partition, until the test ends, and returns
// their claims.
func (e *env) wholeAndMigPods(ctx context.Context, t *testing.T, prefix string) (whole, mig *resourceapi.ResourceClaim) {
	t.Helper()
	e.createTemplate(ctx, t, prefix+"-gpu", e.gpuRequest(1))
	spec := e.gpuRequest(1)
	spec.Devices.Requests[0].Exactly.DeviceClassName = migClass
	e.createTemplate(ctx, t, prefix+"-mig", spec)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		e.deletePods(cctx, t, prefix+"-gpu", prefix+"-mig")
		for _, n := range []string{prefix + "-gpu", prefix + "-mig"} {
			_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(cctx, n, metav1.DeleteOptions{})
		}
	})
	e.startPod(ctx, t, e.gpuPod(prefix+"-gpu", claimRef{name: "gpu", template: prefix + "-gpu"}))
	e.startPod(ctx, t, e.gpuPod(prefix+"-mig", claimRef{name: "gpu", template: prefix + "-mig"}))
	return e.podClaims(ctx, t, prefix+"-gpu")["gpu"], e.podClaims(ctx, t, prefix+"-mig")["gpu"]
}

// claimStatus: the plugin writes each prepared device into its claim's
// status.devices (a whole GPU's UUID and PCI bus ID, a MIG partition's MIG
// UUID, the one the container sees); kubectl describe shows them; and the
// plugin's rights let it write only its driver's entries of claims on its
// own node, nothing else of the status.
func (e *env) claimStatus(ctx context.Context, t *testing.T) {
	whole, mig := e.wholeAndMigPods(ctx, t, "status")
	dev := e.allocated(ctx, t, whole)[0]
	st := e.deviceStatusOf(ctx, t, testNS, whole.Name)[dev.name]
	pci := ""
	if a, ok := dev.attrs["resource.kubernetes.io/pciBusID"]; ok && a.StringValue != nil {
		pci = *a.StringValue
	}
	if st == nil || st.UUID != dev.uuid || st.PCIBusID != pci || st.ProductName == "" || st.MIG != nil {
		t.Errorf("whole GPU %s (%s, %s): status %+v", dev.name, dev.uuid, pci, st)
	}
	out, err := e.kubectlRun(ctx, "-n", testNS, "describe", "resourceclaim", whole.Name)
	if err != nil || !strings.Contains(out, dev.uuid) || !strings.Contains(out, "DeviceStatus") || !strings.Contains(out, "Prepared") {
		t.Errorf("kubectl describe resourceclaim does not show the device's UUID %s and Ready condition (%v):\n%s", dev.uuid, err, out)
	}

	var migStatus *configapi.DeviceStatus
	for _, s := range e.deviceStatusOf(ctx, t, testNS, mig.Name) {
		migStatus = s
	}
	sees := e.whatPodSees(ctx, t, "status-mig")
	if migStatus == nil || !strings.HasPrefix(migStatus.UUID, "MIG-") || migStatus.MIG == nil || migStatus.MIG.Profile != migProfile {
		t.Errorf("MIG status %+v", migStatus)
	} else if !containsValue(sees.env, migStatus.UUID) {
		t.Errorf("the status's MIG UUID %s is not the one the container sees: %v", migStatus.UUID, sees.env)
	}

	// Least privilege: as the plugin's ServiceAccount bound to its node.
	pod := e.readyPluginPod(ctx, t)
	asPlugin := func(node string) kubernetes.Interface {
		cfg := rest.CopyConfig(e.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + systemNS + ":" + pod.Spec.ServiceAccountName,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNS, "system:authenticated"},
			Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	r := whole.Status.Allocation.Devices.Results[0]
	entry := resourceapply.AllocatedDeviceStatus().WithDriver(r.Driver).WithPool(r.Pool).WithDevice(r.Device).
		WithConditions(metaapply.Condition().WithType("Ready").WithStatus(metav1.ConditionTrue).WithReason("E2E").WithMessage("dry run").WithLastTransitionTime(metav1.Now())).
		WithData(runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"DeviceStatus","uuid":"dry-run"}`)})
	apply := func(cs kubernetes.Interface, manager string, status *resourceapply.ResourceClaimStatusApplyConfiguration) error {
		ac := resourceapply.ResourceClaim(whole.Name, testNS).WithStatus(status)
		_, err := cs.ResourceV1().ResourceClaims(testNS).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: manager, Force: true, DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := apply(asPlugin(e.node), "e2e-own", resourceapply.ResourceClaimStatus().WithDevices(entry)); err != nil {
		t.Errorf("the plugin may not write its own driver's entry of a claim on its node: %v", err)
	}
	if err := apply(asPlugin("some-other-node"), "e2e-other", resourceapply.ResourceClaimStatus().WithDevices(entry)); err == nil || !strings.Contains(err.Error(), "resourceclaims/driver") {
		t.Errorf("the plugin's ServiceAccount on another node wrote status.devices of a claim on %s: %v", e.node, err)
	}
	reserved := resourceapply.ResourceClaimStatus().WithReservedFor(resourceapply.ResourceClaimConsumerReference().WithResource("pods").WithName("intruder").WithUID("00000000-0000-0000-0000-000000000001"))
	if err := apply(asPlugin(e.node), "e2e-reserve", reserved); err == nil || !strings.Contains(err.Error(), "resourceclaims/binding") {
		t.Errorf("the plugin could change status.reservedFor: %v", err)
	}
}

// gpudraBinary is the gpudra CLI the image carries (images.sh keeps a copy
// for the suite), or one built now.
func (e *env) gpudraBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GPUDRA_E2E_GPUDRA"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "gpudra")
	cmd := exec.Command("go", "build", "-ldflags", buildVersion(t, "ldflags"), "-o", out, "./cmd/gpudra")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build gpudra: %v\n%s", err, b)
	}
	return out
}

// gpudraStatus: gpudra status and kubectl gpudra status show who holds the
// node's GPUs and partitions, as the claims' allocations say; check
// --cluster says what fits on the cluster right now.
func (e *env) gpudraStatus(ctx context.Context, t *testing.T) {
	bin := e.gpudraBinary(t)
	whole, mig := e.wholeAndMigPods(ctx, t, "gst")
	wholeDev := whole.Status.Allocation.Devices.Results[0].Device
	migDev := mig.Status.Allocation.Devices.Results[0].Device
	e.deviceStatusOf(ctx, t, testNS, mig.Name) // status -o wide shows its UUID

	// -A: as kubectl, status names only the context's namespace's claims
	// without it, and the test's claims are in testNS.
	out, err := run(ctx, bin, "status", "--kubeconfig", e.kubeconfig, "-A", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep clusterstatus.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("gpudra status -o json: %v\n%s", err, out)
	}
	var node *clusterstatus.Node
	for i := range rep.Nodes {
		if rep.Nodes[i].Name == e.node {
			node = &rep.Nodes[i]
		}
	}
	if node == nil {
		t.Fatalf("gpudra status has no node %s:\n%s", e.node, out)
	}
	held := map[string]string{} // device → namespace/claim pods
	gpus := 0
	for _, g := range node.GPUs {
		gpus++
		for _, h := range g.Holders {
			held[g.Device] = h.Name() + " " + strings.Join(h.Pods, ",")
		}
		for _, p := range g.Partitions {
			held[p.Device] = p.Holder.Name() + " " + strings.Join(p.Holder.Pods, ",")
			if p.Holder.Status == nil || !strings.HasPrefix(p.Holder.Status.UUID, "MIG-") {
				t.Errorf("partition %s: no MIG UUID from the claim's status: %+v", p.Device, p.Holder)
			}
		}
	}
	if held[wholeDev] != testNS+"/"+whole.Name+" gst-gpu" || held[migDev] != testNS+"/"+mig.Name+" gst-mig" {
		t.Errorf("gpudra status: held %v; want %s by %s/%s (gst-gpu) and %s by %s/%s (gst-mig)", held, wholeDev, testNS, whole.Name, migDev, testNS, mig.Name)
	}
	if node.Free.GPUs != gpus-2 || node.Free.Partitions[migProfile] == 0 {
		t.Errorf("gpudra status: free %+v of %d GPUs, want %d whole GPUs and room for %s", node.Free, gpus, gpus-2, migProfile)
	}

	// As the kubectl plugin, found on PATH.
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "kubectl-gpudra")); err != nil {
		t.Fatal(err)
	}
	// kubectl takes no flags before a plugin's name: the kubeconfig comes
	// from KUBECONFIG, as kubectl passes its environment on.
	cmd := exec.CommandContext(ctx, e.kubectl, "gpudra", "status", "-o", "wide", "-n", testNS, e.node)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+e.kubeconfig)
	text, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(text), testNS+"/"+mig.Name) || !strings.Contains(string(text), "MIG-") || !strings.Contains(string(text), "FREE\n"+e.node+": ") {
		t.Errorf("kubectl gpudra status -o wide -n %s %s: %v\n%s", testNS, e.node, err, text)
	}
	t.Logf("kubectl gpudra status -o wide:\n%s", text)

	// check --cluster: the node's free GPUs fit, one more does not.
	claim := func(n int) string {
		return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fits, namespace: %s}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: %s, allocationMode: ExactCount, count: %d}
`, testNS, e.driver, n)
	}
	for _, c := range []struct {
		count int
		code  int
	}{{gpus - 2, 0}, {gpus - 1, 1}} {
		cmd := exec.CommandContext(ctx, bin, "check", "--cluster", "--kubeconfig", e.kubeconfig, "-")
		cmd.Stdin = strings.NewReader(claim(c.count))
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stdout
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != c.code || !strings.Contains(stdout.String(), "allocated claims holding devices") {
			t.Errorf("check --cluster, %d GPUs: exit %d, want %d\n%s", c.count, code, c.code, stdout.String())
		}
	}
}

// pluginImage is the gpudra image the chart runs.
func (e *env) pluginImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	pod := e.readyPluginPod(ctx, t)
	for _, c := range pod.Spec.Containers {
		return c.Image
	}
	t.Fatal("the plugin pod has no container")
	return ""
}

// debugNode runs `kubectl debug node/<node> --profile=sysadmin --image
// <image> -- args...`, waits for the pod to end and returns its output.
func (e *env) debugNode(ctx context.Context, t *testing.T, image string, args ...string) string {
	t.Helper()
	out, err := e.kubectlRun(ctx, append([]string{"-n", testNS, "debug", "node/" + e.node, "--profile=sysadmin", "--image", image, "--image-pull-policy", string(e.pullPolicy), "--"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Creating debugging pod (\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kubectl debug named no pod:\n%s", out)
	}
	name := m[1]
	defer func() { _ = e.cs.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	var phase v1.PodPhase
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == v1.PodSucceeded || phase == v1.PodFailed, nil
	}); err != nil {
		t.Fatalf("debug pod %s never ended (%s): %v", name, phase, err)
	}
	logs, err := e.cs.CoreV1().Pods(testNS).GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if phase != v1.PodSucceeded {
		t.Errorf("%v in the debug pod: %s\n%s", args, phase, logs)
	}
	return string(logs)
}

// kubectlDebugInventory: gpudra's image carries the CLI, so `kubectl debug
// node/<node> --image <gpudra image> -- gpudra inventory` reads the node
// (here its fake GPUs) without installing anything; the CLI is stamped with
// the release and revision.
func (e *env) kubectlDebugInventory(ctx context.Context, t *testing.T) {
	image := e.pluginImage(ctx, t)
	out := e.debugNode(ctx, t, image, "gpudra", "inventory", "--device-backend", "fake", "--fake-profile", e.profile, "--compare", e.profile, "-o", "none")
	if !strings.Contains(out, "no differences from fake profile "+e.profile) {
		t.Errorf("gpudra inventory in kubectl debug:\n%s", out)
	}
	out = e.debugNode(ctx, t, image, "gpudra", "version", "-o", "json")
	var info struct{ Version, Revision string }
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Version != buildVersion(t, "version") || info.Revision != buildVersion(t, "revision") {
		t.Errorf("gpudra version in the image: %+v (%v), want %s %s", info, err, buildVersion(t, "version"), buildVersion(t, "revision"))
	}
}

func containsValue(m map[string]string, v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}
