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

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/simulate"
)

// TestGPUDRA runs the scenarios in order on one installation of the chart.
// Each scenario cleans up after itself; the last one uninstalls the chart and
// checks that nothing of the driver is left.
func TestGPUDRA(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	defer writeReport(e)

	t.Run("ChartServerDryRun", func(t *testing.T) { e.chartServerDryRun(ctx, t) })

	e.prepareNamespaces(ctx, t)
	uninstalled := false
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e.deleteNamespace(cctx, testNS)
		if !uninstalled {
			_, _ = run(cctx, e.helm, e.helmArgs("uninstall", releaseName, "-n", systemNS, "--wait")...)
		}
		_ = e.cs.CoreV1().Namespaces().Delete(cctx, systemNS, metav1.DeleteOptions{})
	})

	if !t.Run("Install", func(t *testing.T) { e.install(ctx, t) }) {
		t.FailNow()
	}
	e.startInspector(ctx, t)

	t.Run("ResourceSlicesMatchGolden", func(t *testing.T) { e.slicesMatchGolden(ctx, t) })
	t.Run("AdmissionRejectsBadConfig", func(t *testing.T) { e.admissionRejectsBadConfig(ctx, t) })
	t.Run("CheckAgreesWithAPIServer", func(t *testing.T) { e.checkAgreesWithAPIServer(ctx, t) })
	t.Run("ConfigPolicy", func(t *testing.T) { e.configPolicy(ctx, t) })
	t.Run("ControllerMetrics", func(t *testing.T) { e.controllerMetrics(ctx, t) })
	t.Run("BuildInfo", func(t *testing.T) { e.buildInfo(ctx, t) })
	t.Run("StrandedGPUs", func(t *testing.T) { e.strandedGPUs(ctx, t) })
	t.Run("PluginUtilizationMetrics", func(t *testing.T) { e.pluginUtilization(ctx, t) })
	t.Run("XIDTaintAndRecovery", func(t *testing.T) { e.xidTaintAndRecovery(ctx, t) })
	t.Run("MonitoringAdminAccess", func(t *testing.T) { e.monitoringAdminAccess(ctx, t) })
	t.Run("OneGPU", func(t *testing.T) { e.oneGPU(ctx, t) })
	t.Run("TwoPodsDifferentGPUs", func(t *testing.T) { e.twoPodsDifferentGPUs(ctx, t) })
	t.Run("SharedClaim", func(t *testing.T) { e.sharedClaim(ctx, t) })
	t.Run("ClaimStatusDevices", func(t *testing.T) { e.claimStatus(ctx, t) })
	t.Run("GpudraStatusAndCheckCluster", func(t *testing.T) { e.gpudraStatus(ctx, t) })
	t.Run("KubectlDebugInventory", func(t *testing.T) { e.kubectlDebugInventory(ctx, t) })
	t.Run("SelectorsMemoryAndProductName", func(t *testing.T) { e.selectors(ctx, t) })
	t.Run("UnsatisfiableSelectorStaysPending", func(t *testing.T) { e.unsatisfiable(ctx, t) })
	t.Run("EightGPUsOnOneNVLinkIsland", func(t *testing.T) { e.nvlink8(ctx, t) })
	t.Run("InvalidOpaqueConfig", func(t *testing.T) { e.invalidConfig(ctx, t) })
	t.Run("ResourceSlicePolicy", func(t *testing.T) { e.slicePolicy(ctx, t) })
	t.Run("PluginLeastPrivilege", func(t *testing.T) { e.pluginLeastPrivilege(ctx, t) })
	t.Run("PluginRecoversFromLostSocket", func(t *testing.T) { e.pluginRecoversFromLostSocket(ctx, t) })
	t.Run("PluginRestart", func(t *testing.T) { e.pluginRestart(ctx, t) })
	t.Run("PodDeletedWhilePluginDown", func(t *testing.T) { e.podDeletedWhilePluginDown(ctx, t) })
	t.Run("RollingUpgrade", func(t *testing.T) { e.rollingUpgrade(ctx, t) })
	t.Run("MIGPartition", func(t *testing.T) { e.migPartition(ctx, t) })
	t.Run("MIGExtendedResource", func(t *testing.T) { e.migExtendedResource(ctx, t) })
	t.Run("NvidiaGPUExtendedResource", func(t *testing.T) { e.nvidiaGPUExtendedResource(ctx, t) })
	t.Run("DriverLibraries", func(t *testing.T) { e.driverLibraries(ctx, t) })
	t.Run("TwoRequestsOneContainer", func(t *testing.T) { e.twoRequestsOneContainer(ctx, t) })
	// Sharing: the release is upgraded to a pool with consumable capacity.
	t.Run("MPSTwoPodsSurvivePluginRestart", func(t *testing.T) { e.mpsTwoPods(ctx, t) })
	t.Run("ConsumableCapacityPacking", func(t *testing.T) { e.consumableCapacityPacking(ctx, t) })
	t.Run("TimeSlicingShare", func(t *testing.T) { e.timeSlicingShare(ctx, t) })
	t.Run("NodePools", func(t *testing.T) { e.nodePools(ctx, t) })
	t.Run("ControllerLeaderElection", func(t *testing.T) { e.controllerLeaderElection(ctx, t) })
	t.Run("WebhookApartFromFleet", func(t *testing.T) { e.webhookApartFromFleet(ctx, t) })
	t.Run("DevicePluginConflict", func(t *testing.T) { e.devicePluginConflict(ctx, t) })
	if !t.Run("Uninstall", func(t *testing.T) {
		e.uninstall(ctx, t)
		uninstalled = true
	}) {
		return
	}
	// On a cluster with nothing of gpudra left: README.md's install
	// section, as written.
	t.Run("ReadmeInstall", func(t *testing.T) { e.readmeInstall(ctx, t) })
}

// chartServerDryRun renders the chart and has the API server validate every
// object (field shapes, and the CEL of DeviceClasses and the admission
// policy, which no JSON schema checks).
func (e *env) chartServerDryRun(ctx context.Context, t *testing.T) {
	// helm template does not ask the cluster which version it runs.
	sv, err := e.cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// With the optional NetworkPolicy too, so that the server checks it.
	args := e.helmArgs(append([]string{"template", releaseName, e.chart, "-n", systemNS, "--kube-version", sv.GitVersion,
		"--set", "networkPolicies.enabled=true", "--set", "networkPolicies.apiServer[0].ipBlock.cidr=10.0.0.10/32"},
		e.chartValues()...)...)
	rendered, err := run(ctx, e.helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(f, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	// The namespace does not exist yet; the server checks namespaced objects
	// in the default namespace instead.
	noNS := strings.ReplaceAll(rendered, "namespace: "+systemNS, "namespace: default")
	if err := os.WriteFile(f, []byte(noNS), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.kubectlRun(ctx, "apply", "--dry-run=server", "-f", f)
	if err != nil {
		t.Fatalf("the API server rejects the rendered chart: %v", err)
	}
	t.Logf("server dry-run:\n%s", out)
	// And the server does catch what the schema cannot: a broken CEL selector.
	bad := strings.Replace(noNS, "device.driver ==", "device.driver ===", 1)
	if bad == noNS {
		t.Fatal("no DeviceClass selector in the rendered chart")
	}
	if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kubectlRun(ctx, "apply", "--dry-run=server", "-f", f); err == nil || !strings.Contains(err.Error(), "cel") && !strings.Contains(err.Error(), "Syntax error") {
		t.Errorf("a DeviceClass with a broken CEL selector was not rejected by the server: %v", err)
	}
}

// deleteNamespace deletes a namespace and waits, up to two minutes, until
// it is gone. For set-up and teardown: what fails is left to the suite's
// other checks.
func (e *env) deleteNamespace(ctx context.Context, ns string) {
	_ = e.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	_ = poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (e *env) prepareNamespaces(ctx context.Context, t *testing.T) {
	t.Helper()
	// Leftovers of an interrupted run.
	_, _ = run(ctx, e.helm, e.helmArgs("uninstall", releaseName, "-n", systemNS, "--wait")...)
	for _, ns := range []string{testNS} {
		e.deleteNamespace(ctx, ns)
		_, err := e.cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Pods need the namespace's default ServiceAccount.
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().ServiceAccounts(testNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal("no default ServiceAccount in", testNS)
	}
}

// expectedSlices are the slices the plugin publishes for this node and
// profile, from the same plugin run in-process (internal/simulate).
func (e *env) expectedSlices(ctx context.Context, t *testing.T) []*resourceapi.ResourceSlice {
	t.Helper()
	return simulatedSlices(ctx, t, simulate.Options{NodeName: e.node, DriverName: e.driver, Profile: e.profile})
}

// simulatedSlices are the slices the plugin publishes with opts (Dir
// aside: a temporary directory), run in-process (internal/simulate).
func simulatedSlices(ctx context.Context, t *testing.T, opts simulate.Options) []*resourceapi.ResourceSlice {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpudra-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts.Dir = dir
	// The in-process plugin logs through klog like the real one; its log is
	// not what this suite is about.
	ctx = klog.NewContext(ctx, logr.Discard())
	c, err := simulate.Start(ctx, opts, nil)
	if err != nil {
		t.Fatalf("in-process plugin: %v", err)
	}
	defer c.Stop()
	sl, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func countDevices[S ~[]E, E any](sl S, devs func(E) int) int {
	n := 0
	for _, s := range sl {
		n += devs(s)
	}
	return n
}

func (e *env) install(ctx context.Context, t *testing.T) {
	start := time.Now()
	args := e.helmArgs(append([]string{"install", releaseName, e.chart, "-n", systemNS, "--create-namespace", "--wait", "--timeout", "3m"}, e.chartValues()...)...)
	done := make(chan error, 1)
	go func() { _, err := run(ctx, e.helm, args...); done <- err }()

	// The GPU node is where the plugin runs.
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.pluginPods(ctx)
		if err != nil || len(pods) == 0 || pods[0].Spec.NodeName == "" {
			return false, err
		}
		e.node = pods[0].Spec.NodeName
		return true, nil
	}); err != nil {
		t.Fatalf("no plugin pod scheduled: %v", err)
	}
	want := countDevices(e.expectedSlices(ctx, t), func(s *resourceapi.ResourceSlice) int { return len(s.Spec.Devices) })
	var published time.Time
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		sl, err := e.slices(ctx)
		if err != nil {
			return false, err
		}
		if countDevices(sl, func(s resourceapi.ResourceSlice) int { return len(s.Spec.Devices) }) == want {
			published = time.Now()
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the plugin did not publish %d devices: %v", want, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pod := e.readyPluginPod(ctx, t)
	record(t, "plugin: helm install → all ResourceSlices published", published.Sub(start))
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			// startedAt has a resolution of one second.
			record(t, "plugin: container started → ResourceSlices published (±1 s)", published.Sub(cs.State.Running.StartedAt.Time))
		}
	}
	t.Logf("installed on node %s: %d devices, plugin pod %s", e.node, want, pod.Name)
}

// normalize drops what differs between two nodes running the same profile
// (the node's name, the UUIDs seeded by it, the pool generation), so that
// slices compare with the golden files made for node-1.
func normalize(t *testing.T, node string, specs []resourceapi.ResourceSliceSpec) []string {
	t.Helper()
	var out []string
	for _, s := range specs {
		s := *s.DeepCopy()
		s.NodeName = ptr.To("NODE")
		s.Pool.Name = "NODE"
		s.Pool.Generation = 0
		clearTaintTimes(&s)
		for i := range s.Devices {
			for _, k := range []resourceapi.QualifiedName{"uuid", "parentUUID"} {
				if a, ok := s.Devices[i].Attributes[k]; ok && a.StringValue != nil {
					a.StringValue = ptr.To("UUID")
					s.Devices[i].Attributes[k] = a
				}
			}
		}
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.ReplaceAll(string(b), node, "NODE"))
	}
	sort.Strings(out)
	return out
}

func (e *env) slicesMatchGolden(ctx context.Context, t *testing.T) {
	sl, err := e.slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []resourceapi.ResourceSliceSpec
	for _, s := range sl {
		got = append(got, s.Spec)
	}
	// Exactly what the plugin publishes in-process for this node...
	var sim []resourceapi.ResourceSliceSpec
	for _, s := range e.expectedSlices(ctx, t) {
		sim = append(sim, s.Spec)
	}
	if g, w := normalizeExact(t, got), normalizeExact(t, sim); strings.Join(g, "---\n") != strings.Join(w, "---\n") {
		t.Errorf("the cluster's slices differ from the in-process plugin's for node %s:\ngot:\n%s\nwant:\n%s", e.node, strings.Join(g, "---\n"), strings.Join(w, "---\n"))
	}
	// ...and, but for the node's name and UUIDs, the golden slices.
	golden := filepath.Join("..", "internal", "simulate", "testdata", "slices", e.profile+".yaml")
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want []resourceapi.ResourceSliceSpec
	for _, doc := range strings.Split(string(data), "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s struct {
			Spec resourceapi.ResourceSliceSpec `json:"spec"`
		}
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatalf("%s: %v", golden, err)
		}
		want = append(want, s.Spec)
	}
	if e.driver != "gpu.gpudra.io" {
		t.Skipf("golden slices are for driver gpu.gpudra.io, not %s", e.driver)
	}
	g, w := normalize(t, e.node, got), normalize(t, "node-1", want)
	if strings.Join(g, "---\n") != strings.Join(w, "---\n") {
		t.Errorf("the cluster's slices differ from %s:\ngot:\n%s", golden, strings.Join(g, "---\n"))
	}
	t.Logf("%d slices, equal to the in-process plugin's and to %s", len(got), golden)
}

// clearTaintTimes drops the time the API server stamps on every device
// taint when it stores a slice (the monitoring devices' taint, health
// taints): the plugin in-process and the golden files have none.
func clearTaintTimes(s *resourceapi.ResourceSliceSpec) {
	for i := range s.Devices {
		for j := range s.Devices[i].Taints {
			s.Devices[i].Taints[j].TimeAdded = nil
		}
	}
}

func normalizeExact(t *testing.T, specs []resourceapi.ResourceSliceSpec) []string {
	var out []string
	for _, s := range specs {
		s := *s.DeepCopy()
		s.Pool.Generation = 0
		clearTaintTimes(&s)
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

func (e *env) oneGPU(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "one-gpu", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("one-gpu", claimRef{name: "gpu", template: "one-gpu"}))
	claim := e.podClaims(ctx, t, "one-gpu")["gpu"]
	devs := e.allocated(ctx, t, claim)
	if len(devs) != 1 {
		t.Fatalf("claim %s got %d devices, want 1", claim.Name, len(devs))
	}
	assertSees(t, "one-gpu", e.whatPodSees(ctx, t, "one-gpu"), devs)
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 1 {
		t.Errorf("CDI specs for claim %s on the node: %v, want one", claim.UID, specs)
	}
	e.deletePods(ctx, t, "one-gpu")
	// Unprepared: the spec is gone, and so is the claim made from the template.
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 0 {
		t.Errorf("CDI specs of claim %s left after its pod is gone: %v", claim.UID, specs)
	}
	e.waitClaimGone(ctx, t, claim.Name)
}

func (e *env) waitClaimGone(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := e.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("claim %s not deleted: %v", name, err)
	}
}

func (e *env) twoPodsDifferentGPUs(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "two-pods", e.gpuRequest(1))
	a := e.startPod(ctx, t, e.gpuPod("pod-a", claimRef{name: "gpu", template: "two-pods"}))
	b := e.startPod(ctx, t, e.gpuPod("pod-b", claimRef{name: "gpu", template: "two-pods"}))
	da := e.allocated(ctx, t, e.podClaims(ctx, t, a.Name)["gpu"])
	db := e.allocated(ctx, t, e.podClaims(ctx, t, b.Name)["gpu"])
	sa, sb := e.whatPodSees(ctx, t, a.Name), e.whatPodSees(ctx, t, b.Name)
	assertSees(t, a.Name, sa, da)
	assertSees(t, b.Name, sb, db)
	if ga, gb := sortedMap(sa.fakeGPUs()), sortedMap(sb.fakeGPUs()); fmt.Sprint(ga) == fmt.Sprint(gb) {
		t.Errorf("both pods see GPU %v", ga)
	}
	e.deletePods(ctx, t, a.Name, b.Name)
}

func (e *env) sharedClaim(ctx context.Context, t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared-gpu", Namespace: testNS}, Spec: e.gpuRequest(1)}
	if _, err := e.cs.ResourceV1().ResourceClaims(testNS).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := e.startPod(ctx, t, e.gpuPod("shared-a", claimRef{name: "gpu", claim: "shared-gpu"}))
	b := e.startPod(ctx, t, e.gpuPod("shared-b", claimRef{name: "gpu", claim: "shared-gpu"}))
	c := e.podClaims(ctx, t, a.Name)["gpu"]
	if n := len(c.Status.ReservedFor); n != 2 {
		t.Errorf("claim reserved for %d pods, want 2", n)
	}
	devs := e.allocated(ctx, t, c)
	sa, sb := e.whatPodSees(ctx, t, a.Name), e.whatPodSees(ctx, t, b.Name)
	assertSees(t, a.Name, sa, devs)
	assertSees(t, b.Name, sb, devs)
	e.deletePods(ctx, t, a.Name, b.Name)
	if specs := e.cdiSpecsOf(ctx, t, string(c.UID)); len(specs) != 0 {
		t.Errorf("CDI specs of the shared claim left after both pods are gone: %v", specs)
	}
	if err := e.cs.ResourceV1().ResourceClaims(testNS).Delete(ctx, "shared-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitClaimGone(ctx, t, "shared-gpu")
}

// selectors: a DeviceClass selecting on productName, and a claim on it
// selecting on capacity.memory.
func (e *env) selectors(ctx context.Context, t *testing.T) {
	devs := e.devicesByName(ctx, t)
	var product string
	for _, d := range devs {
		if a, ok := d.attrs["productName"]; ok && a.StringValue != nil {
			product = *a.StringValue
			break
		}
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-product"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].productName == '%s'", e.driver, e.driver, product),
		}}}},
	}
	if _, err := e.cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.cs.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}) }()
	spec := e.gpuRequest(1, fmt.Sprintf("device.capacity['%s'].memory.compareTo(quantity('40Gi')) >= 0", e.driver))
	spec.Devices.Requests[0].Exactly.DeviceClassName = class.Name
	e.createTemplate(ctx, t, "big-gpu", spec)
	e.startPod(ctx, t, e.gpuPod("big-gpu", claimRef{name: "gpu", template: "big-gpu"}))
	got := e.allocated(ctx, t, e.podClaims(ctx, t, "big-gpu")["gpu"])
	assertSees(t, "big-gpu", e.whatPodSees(ctx, t, "big-gpu"), got)
	for _, d := range got {
		mem := d.capacity["memory"].Value
		if mem.Cmp(resourceQuantity("40Gi")) < 0 || ptr.Deref(d.attrs["productName"].StringValue, "") != product {
			t.Errorf("allocated %s: memory %s, product %q; want >= 40Gi and %q", d.name, mem.String(), ptr.Deref(d.attrs["productName"].StringValue, ""), product)
		}
	}
	e.deletePods(ctx, t, "big-gpu")
}

// unsatisfiable: no device has a terabyte; the pod stays Pending with the
// scheduler's reason, and the node prepares nothing.
func (e *env) unsatisfiable(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "huge-gpu", e.gpuRequest(1, fmt.Sprintf("device.capacity['%s'].memory.compareTo(quantity('1Ti')) >= 0", e.driver)))
	start := time.Now()
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, e.gpuPod("huge-gpu", claimRef{name: "gpu", template: "huge-gpu"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := e.waitUnschedulable(ctx, t, "huge-gpu")
	record(t, t.Name()+": pod create → Unschedulable", time.Since(start))
	if !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("scheduler's reason %q does not say that the claim cannot be allocated", msg)
	}
	// It stays so, and nothing was allocated or prepared.
	time.Sleep(3 * time.Second)
	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "huge-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1.PodPending || p.Spec.NodeName != "" {
		t.Errorf("pod is %s on node %q, want Pending and unbound", p.Status.Phase, p.Spec.NodeName)
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		c, err := e.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, ptr.Deref(st.ResourceClaimName, ""), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation != nil {
			t.Errorf("claim %s allocated: %v", c.Name, c.Status.Allocation.Devices.Results)
		}
		if specs := e.cdiSpecsOf(ctx, t, string(c.UID)); len(specs) != 0 {
			t.Errorf("CDI specs written for the unallocated claim: %v", specs)
		}
	}
	t.Logf("scheduler: %s", msg)
	e.deletePods(ctx, t, "huge-gpu")
}

// nvlink8: eight GPUs that share one NVLink island, through matchAttribute.
func (e *env) nvlink8(ctx context.Context, t *testing.T) {
	spec := e.gpuRequest(8)
	spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
		Requests:       []string{"gpu"},
		MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(e.driver + "/nvlinkGroup")),
	}}
	e.createTemplate(ctx, t, "nvlink-8", spec)
	e.startPod(ctx, t, e.gpuPod("nvlink-8", claimRef{name: "gpu", template: "nvlink-8"}))
	devs := e.allocated(ctx, t, e.podClaims(ctx, t, "nvlink-8")["gpu"])
	if len(devs) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(devs))
	}
	groups := map[int64]bool{}
	for _, d := range devs {
		groups[ptr.Deref(d.attrs["nvlinkGroup"].IntValue, -1)] = true
	}
	if len(groups) != 1 {
		t.Errorf("the 8 GPUs span NVLink groups %v", groups)
	}
	assertSees(t, "nvlink-8", e.whatPodSees(ctx, t, "nvlink-8"), devs)
	e.deletePods(ctx, t, "nvlink-8")
}

// invalidConfig: a misspelt field in the claim's opaque config fails the
// prepare; the pod's event names the field.
func (e *env) invalidConfig(ctx context.Context, t *testing.T) {
	spec := e.gpuRequest(1)
	spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
		Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver:     e.driver,
			Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilites":["compute"]}`)},
		}},
	}}
	// The webhook would refuse the template, and the claim made from it
	// (AdmissionRejectsBadConfig); this scenario is about the plugin's own
	// check, for clusters that run no webhook.
	defer e.skipAdmission(ctx, t)()
	e.createTemplateUnchecked(ctx, t, "bad-config", spec)
	start := time.Now()
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, e.gpuPod("bad-config", claimRef{name: "gpu", template: "bad-config"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var found string
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := e.eventsFor(ctx, "Pod", "bad-config")
		for _, ev := range evs {
			if strings.Contains(ev, "driverCapabilites") {
				found = ev
				return true, nil
			}
		}
		return false, err
	}); err != nil {
		evs, _ := e.eventsFor(ctx, "Pod", "bad-config")
		t.Fatalf("no event names the field driverCapabilites: %v; events: %q", err, evs)
	}
	record(t, t.Name()+": pod create → event naming the field", time.Since(start))
	t.Logf("event: %s", found)
	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "bad-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase == v1.PodRunning {
		t.Errorf("pod with an invalid config is Running")
	}
	c := e.podClaims(ctx, t, "bad-config")["gpu"]
	if specs := e.cdiSpecsOf(ctx, t, string(c.UID)); len(specs) != 0 {
		t.Errorf("CDI spec written for a claim whose config is invalid: %v", specs)
	}
	e.deletePods(ctx, t, "bad-config")
}

// slicePolicy: the plugin's ServiceAccount, on its node, may not write the
// ResourceSlices of another node or another driver (dry-run writes, as the
// ServiceAccount with the node bound into its credentials).
func (e *env) slicePolicy(ctx context.Context, t *testing.T) {
	pod := e.readyPluginPod(ctx, t)
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + systemNS + ":" + pod.Spec.ServiceAccountName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNS, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {e.node}},
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	slice := func(node, driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-policy-"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				NodeName: ptr.To(node),
				Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
				Devices:  []resourceapi.Device{{Name: "gpu-99"}},
			},
		}
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := sa.ResourceV1().ResourceSlices().Create(ctx, slice(e.node, e.driver), dry); err != nil {
		t.Errorf("plugin may not write its own node's slice: %v", err)
	}
	for _, c := range []struct{ node, driver, want string }{
		{"some-other-node", e.driver, "may not modify ResourceSlices of node some-other-node"},
		{e.node, "other.example.com", "only modify ResourceSlices of driver " + e.driver},
	} {
		_, err := sa.ResourceV1().ResourceSlices().Create(ctx, slice(c.node, c.driver), dry)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("slice for node %s, driver %s: got %v, want a denial saying %q", c.node, c.driver, err, c.want)
		}
	}
}

// running is a pod's state that a disturbance would change.
type running struct {
	uid, containerID string
	restarts         int32
}

func (e *env) runningState(ctx context.Context, t *testing.T, name string) running {
	t.Helper()
	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("pod %s is not running: %s", name, p.Status.Phase)
	}
	cs := p.Status.ContainerStatuses[0]
	return running{uid: string(p.UID), containerID: cs.ContainerID, restarts: cs.RestartCount}
}

func (e *env) assertUndisturbed(ctx context.Context, t *testing.T, name string, before running, devs []device, claimUID types.UID) {
	t.Helper()
	if after := e.runningState(ctx, t, name); after != before {
		t.Errorf("pod %s was disturbed: %+v, before %+v", name, after, before)
	}
	assertSees(t, name, e.whatPodSees(ctx, t, name), devs)
	if specs := e.cdiSpecsOf(ctx, t, string(claimUID)); len(specs) != 1 {
		t.Errorf("pod %s: CDI spec of its claim: %v, want one", name, specs)
	}
}

// pluginRestart: the plugin pod is deleted while a pod uses a GPU. The pod
// keeps its GPU, the new plugin reconciles, and new pods still start.
func (e *env) pluginRestart(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "restart", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("before-restart", claimRef{name: "gpu", template: "restart"}))
	claim := e.podClaims(ctx, t, "before-restart")["gpu"]
	devs := e.allocated(ctx, t, claim)
	before := e.runningState(ctx, t, "before-restart")

	old := e.readyPluginPod(ctx, t)
	start := time.Now()
	if err := e.cs.CoreV1().Pods(systemNS).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.readyPluginPod(ctx, t, string(old.UID))
	record(t, "plugin pod deleted → new plugin pod Ready", time.Since(start))

	e.assertUndisturbed(ctx, t, "before-restart", before, devs, claim.UID)
	e.startPod(ctx, t, e.gpuPod("after-restart", claimRef{name: "gpu", template: "restart"}))
	d2 := e.allocated(ctx, t, e.podClaims(ctx, t, "after-restart")["gpu"])
	assertSees(t, "after-restart", e.whatPodSees(ctx, t, "after-restart"), d2)
	if d2[0].uuid == devs[0].uuid {
		t.Errorf("the new pod got the GPU the running pod holds: %s", d2[0].uuid)
	}
	e.deletePods(ctx, t, "before-restart", "after-restart")
}

// pluginDaemonSet is the name the chart gives the plugin's DaemonSet.
func (e *env) pluginDaemonSet() string {
	if !strings.Contains(releaseName, "gpudra") {
		return releaseName + "-gpudra-kubelet-plugin"
	}
	return releaseName + "-kubelet-plugin"
}

// setPluginPaused keeps the plugin off the node (or lets it back) through
// the DaemonSet's nodeSelector.
func (e *env) setPluginPaused(ctx context.Context, t *testing.T, paused bool) {
	t.Helper()
	value := `null`
	if paused {
		value = `"true"`
	}
	patch := []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"gpudra-e2e/plugin-paused":` + value + `}}}}}`)
	if _, err := e.cs.AppsV1().DaemonSets(systemNS).Patch(ctx, e.pluginDaemonSet(), types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podDeletedWhilePluginDown: a pod deleted while no plugin runs on the node
// is unprepared once the plugin is back.
func (e *env) podDeletedWhilePluginDown(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "while-down", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("while-down", claimRef{name: "gpu", template: "while-down"}))
	claim := e.podClaims(ctx, t, "while-down")["gpu"]

	e.setPluginPaused(ctx, t, true)
	restored := false
	defer func() {
		if !restored {
			e.setPluginPaused(ctx, t, false)
		}
	}()
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.pluginPods(ctx)
		return err == nil && len(pods) == 0, err
	}); err != nil {
		t.Fatalf("plugin pod still there: %v", err)
	}
	// The kubelet stops the containers but cannot unprepare: the claim's
	// CDI spec stays, and so does the pod object.
	if err := e.cs.CoreV1().Pods(testNS).Delete(ctx, "while-down", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 1 {
		t.Errorf("with the plugin down the CDI spec should stay until it unprepares; found %v", specs)
	}

	start := time.Now()
	e.setPluginPaused(ctx, t, false)
	restored = true
	e.readyPluginPod(ctx, t)
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "while-down", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(e.cdiSpecsOf(ctx, t, string(claim.UID))) == 0, nil
	}); err != nil {
		t.Fatalf("pod deleted while the plugin was down not unprepared after it came back: %v; CDI: %v", err, e.cdiSpecsOf(ctx, t, string(claim.UID)))
	}
	record(t, "plugin back → pod deleted meanwhile unprepared", time.Since(start))
	e.waitClaimGone(ctx, t, claim.Name)
	// The GPU is free again: a pod that needs every whole GPU starts.
	all := 0
	for _, d := range e.devicesByName(ctx, t) {
		if ptr.Deref(d.attrs["type"].StringValue, "") == "gpu" {
			all++
		}
	}
	e.createTemplate(ctx, t, "all-gpus", e.gpuRequest(int64(all)))
	e.startPod(ctx, t, e.gpuPod("all-gpus", claimRef{name: "gpu", template: "all-gpus"}))
	e.deletePods(ctx, t, "all-gpus")
}

// rollingUpgrade: helm upgrade changes the plugin's pod template; the
// DaemonSet surges a new plugin pod next to the old one, and no running pod
// is disturbed.
func (e *env) rollingUpgrade(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "upgrade", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("during-upgrade", claimRef{name: "gpu", template: "upgrade"}))
	claim := e.podClaims(ctx, t, "during-upgrade")["gpu"]
	devs := e.allocated(ctx, t, claim)
	before := e.runningState(ctx, t, "during-upgrade")
	old := e.readyPluginPod(ctx, t)

	// Watch the plugin pods while helm upgrades: with maxSurge 1 two run
	// side by side for a while.
	stop := make(chan struct{})
	maxPods := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				maxPods <- most
				return
			case <-time.After(100 * time.Millisecond):
			}
			if pods, err := e.pluginPods(ctx); err == nil {
				running := 0
				for _, p := range pods {
					if p.Status.Phase == v1.PodRunning {
						running++
					}
				}
				most = max(most, running)
			}
		}
	}()
	start := time.Now()
	args := e.helmArgs(append(append([]string{"upgrade", releaseName, e.chart, "-n", systemNS, "--wait", "--timeout", "3m"}, e.chartValues()...),
		"--set-string", "kubeletPlugin.podAnnotations.gpudra-e2e/rollout="+start.Format("150405"))...)
	if _, err := run(ctx, e.helm, args...); err != nil {
		close(stop)
		t.Fatal(err)
	}
	newPod := e.readyPluginPod(ctx, t, string(old.UID))
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.pluginPods(ctx)
		return err == nil && len(pods) == 1, err
	}); err != nil {
		t.Errorf("old plugin pod not gone: %v", err)
	}
	close(stop)
	record(t, "helm upgrade → new plugin pod alone", time.Since(start))
	if most := <-maxPods; most < 2 {
		t.Errorf("at most %d plugin pod(s) ran during the upgrade; maxSurge 1 should run old and new side by side", most)
	}
	t.Logf("plugin pod %s replaced by %s", old.Name, newPod.Name)

	e.assertUndisturbed(ctx, t, "during-upgrade", before, devs, claim.UID)
	e.startPod(ctx, t, e.gpuPod("after-upgrade", claimRef{name: "gpu", template: "upgrade"}))
	assertSees(t, "after-upgrade", e.whatPodSees(ctx, t, "after-upgrade"), e.allocated(ctx, t, e.podClaims(ctx, t, "after-upgrade")["gpu"]))
	e.deletePods(ctx, t, "during-upgrade", "after-upgrade")
}

// uninstall: with no GPU pods left, helm uninstall removes the plugin, its
// ResourceSlices (the kubelet wipes them 30 s after the last plugin
// instance unregisters), its sockets and every CDI spec.
func (e *env) uninstall(ctx context.Context, t *testing.T) {
	list, err := e.cs.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: "gpudra-e2e=test"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.Name != inspectorPod {
			names = append(names, p.Name)
		}
	}
	e.deletePods(ctx, t, names...)

	start := time.Now()
	if _, err := run(ctx, e.helm, e.helmArgs("uninstall", releaseName, "-n", systemNS, "--wait", "--timeout", "3m")...); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.pluginPods(ctx)
		return err == nil && len(pods) == 0, err
	}); err != nil {
		t.Fatalf("plugin pods left: %v", err)
	}
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		sl, err := e.slices(ctx)
		return err == nil && len(sl) == 0, err
	}); err != nil {
		t.Errorf("ResourceSlices left after uninstall: %v", err)
	}
	record(t, "helm uninstall → ResourceSlices gone", time.Since(start))
	if specs := e.cdiSpecsOf(ctx, t, ""); len(specs) != 0 {
		t.Errorf("CDI specs left after uninstall: %v", specs)
	}
	for _, f := range e.hostFiles(ctx, t, "registry") {
		if strings.Contains(f, e.driver) {
			t.Errorf("registration socket left: %s", f)
		}
	}
	for _, f := range e.hostFiles(ctx, t, "plugins/"+e.driver) {
		if strings.HasSuffix(f, ".sock") {
			t.Errorf("plugin socket left: %s", f)
		}
	}
	classes, err := e.cs.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes.Items {
		if strings.Contains(c.Name, e.driver) {
			t.Errorf("DeviceClass %s left after uninstall", c.Name)
		}
	}
	e.controllerLeftovers(ctx, t)
	claims, err := e.cs.ResourceV1().ResourceClaims(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		t.Errorf("ResourceClaim %s left", c.Name)
	}
}

// waitUnschedulable waits until the scheduler marks pod Unschedulable and
// returns its reason.
func (e *env) waitUnschedulable(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	var msg string
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				msg = c.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("pod %s not marked unschedulable: %v\n%s", pod, err, e.describePod(ctx, pod))
	}
	return msg
}
