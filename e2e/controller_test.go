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
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

const (
	controllerLabel = "app.kubernetes.io/component=controller,app.kubernetes.io/instance=" + releaseName
	webhookLabel    = "app.kubernetes.io/component=webhook,app.kubernetes.io/instance=" + releaseName
	controllerName  = releaseName + "-controller"
	webhookName     = releaseName + "-webhook"
	// skipAdmissionLabel on a namespace keeps the webhook away from it
	// (the suite installs the chart with a namespaceSelector on it), so
	// that a scenario can still create what only the plugin rejects.
	skipAdmissionLabel = "gpudra-e2e/skip-admission"
)

// controllerPods are the fleet controller's running pods.
func (e *env) controllerPods(ctx context.Context) ([]v1.Pod, error) {
	return e.runningPods(ctx, controllerLabel)
}

// webhookPods are the admission webhook's running pods.
func (e *env) webhookPods(ctx context.Context) ([]v1.Pod, error) {
	return e.runningPods(ctx, webhookLabel)
}

func (e *env) runningPods(ctx context.Context, selector string) ([]v1.Pod, error) {
	list, err := e.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == v1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// metrics scrapes a pod's /metrics on port 8080 through the API server's
// pod proxy (no Prometheus on the local cluster, and no route to pod IPs
// from outside a kind node).
func (e *env) metrics(ctx context.Context, pod v1.Pod, port string) (gpudratest.Samples, error) {
	raw, err := e.cs.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, port, "metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", pod.Name, err)
	}
	m, err := gpudratest.ParseText(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pod.Name, err)
	}
	return m, nil
}

// sumMetric adds up every series of a metric whose labels include all of
// the given label="value" pairs.
func sumMetric(m gpudratest.Samples, name string, labels ...string) float64 {
	return m.Sum(name, labels...)
}

// leader returns the controller pod that holds the lease, and its
// metrics.
func (e *env) leader(ctx context.Context, t *testing.T) (v1.Pod, map[string]float64) {
	t.Helper()
	var leader v1.Pod
	var lm map[string]float64
	err := poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := e.controllerPods(ctx)
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			m, err := e.metrics(ctx, p, "8080")
			if err != nil {
				return false, err
			}
			if m["gpudra_controller_leader"] == 1 {
				leader, lm = p, m
				n++
			}
		}
		return n == 1, nil
	})
	if err != nil {
		t.Fatalf("no single controller leader: %v", err)
	}
	return leader, lm
}

// admissionRejectsBadConfig: a claim template whose gpudra config is
// misspelt is refused at apply, with the field named; other drivers'
// configs and valid ones pass; a DeviceClass with a bad config is refused
// too.
func (e *env) admissionRejectsBadConfig(ctx context.Context, t *testing.T) {
	dir := t.TempDir()
	apply := func(name, manifest string) (string, error) {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		return e.kubectlRun(ctx, "apply", "-f", f)
	}
	template := func(name, driver, params string) string {
		return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: %s}}]
      config:
      - opaque:
          driver: %s
          parameters: %s
`, name, testNS, e.driver, driver, params)
	}

	start := time.Now()
	// The webhook may come up a moment after the chart: retry while the
	// API server cannot reach it yet.
	var out string
	var err error
	if perr := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		out, err = apply("typo", template("typo", e.driver,
			`{apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfig, driverCapabilites: [compute]}`))
		return err != nil && strings.Contains(err.Error(), "driverCapabilites"), nil
	}); perr != nil {
		t.Fatalf("a misspelt config was not denied by the webhook: %v (%s)", err, out)
	}
	record(t, t.Name()+": kubectl apply of a bad config → denied", time.Since(start))
	for _, want := range []string{`spec.spec.devices.config[0].opaque.parameters: unknown field "driverCapabilites"`, `ResourceClaimTemplate "typo" is invalid`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the denial does not say %q:\n%v", want, err)
		}
	}
	t.Logf("denied: %v", err)

	if _, err := apply("bad-value", template("bad-value", e.driver,
		`{apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfig, driverCapabilities: [compute, cuda]}`)); err == nil ||
		!strings.Contains(err.Error(), `driverCapabilities[1]: Unsupported value: "cuda"`) {
		t.Errorf("an unsupported capability was not denied with its field: %v", err)
	}
	// A config for another driver is not ours to judge.
	if _, err := apply("other-driver", template("other-driver", "gpu.example.com", `{anything: goes}`)); err != nil {
		t.Errorf("another driver's config was refused: %v", err)
	}
	if _, err := apply("valid", template("valid", e.driver,
		`{apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfig, driverCapabilities: [compute, utility, graphics]}`)); err != nil {
		t.Errorf("a valid config was refused: %v", err)
	}
	// DeviceClasses carry configs too.
	class := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: e2e-bad-config.%s}
spec:
  selectors: [{cel: {expression: "device.driver == '%s'"}}]
  config:
  - opaque:
      driver: %s
      parameters: {apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfg}
`, e.driver, e.driver, e.driver)
	if _, err := apply("class", class); err == nil || !strings.Contains(err.Error(), `spec.config[0].opaque.parameters.kind: "GpuConfg" is not known`) {
		t.Errorf("a DeviceClass with an unknown kind was not denied with its field: %v", err)
		_ = e.cs.ResourceV1().DeviceClasses().Delete(ctx, "e2e-bad-config."+e.driver, metav1.DeleteOptions{})
	}
	for _, n := range []string{"other-driver", "valid"} {
		if err := e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}

	// The reviews are counted, by the webhook's replicas.
	var denied float64
	webhooks, err := e.webhookPods(ctx)
	if err != nil || len(webhooks) == 0 {
		t.Fatalf("no running webhook pod: %v", err)
	}
	for _, p := range webhooks {
		m, err := e.metrics(ctx, p, "8080")
		if err != nil {
			t.Fatal(err)
		}
		denied += sumMetric(m, "gpudra_admission_reviews_total", `result="denied"`)
	}
	if denied < 3 {
		t.Errorf("gpudra_admission_reviews_total{result=denied} summed over the replicas = %v, want at least 3", denied)
	}
}

func mustControllerPods(ctx context.Context, t *testing.T, e *env) []v1.Pod {
	t.Helper()
	pods, err := e.controllerPods(ctx)
	if err != nil || len(pods) == 0 {
		t.Fatalf("no running controller pod: %v", err)
	}
	return pods
}

// skipAdmission puts the test namespace outside the webhook's
// namespaceSelector, for what only the plugin is to reject, until the
// returned function is called.
func (e *env) skipAdmission(ctx context.Context, t *testing.T) (restore func()) {
	t.Helper()
	label := func(on bool) {
		t.Helper()
		ns, err := e.cs.CoreV1().Namespaces().Get(ctx, testNS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if on {
			ns.Labels[skipAdmissionLabel] = "true"
		} else {
			delete(ns.Labels, skipAdmissionLabel)
		}
		if _, err := e.cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label(true)
	return func() { label(false) }
}

// createTemplateUnchecked creates a template the webhook would refuse (call
// skipAdmission first), retrying until the API server's view of the
// namespace's labels has caught up.
func (e *env) createTemplateUnchecked(ctx context.Context, t *testing.T, name string, spec resourceapi.ResourceClaimSpec) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}
	var lastErr error
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, lastErr = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Create(ctx, tmpl, metav1.CreateOptions{})
		return lastErr == nil || apierrors.IsAlreadyExists(lastErr), nil
	}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s outside admission: %v", name, lastErr)
	}
}

// controllerMetrics: the leader's fleet metrics match the cluster: every
// published device counted, and a running pod's GPU allocated.
func (e *env) controllerMetrics(ctx context.Context, t *testing.T) {
	sl, err := e.slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Monitoring devices are views of GPUs for monitoring pods, not
	// capacity: the fleet metrics leave them out.
	published, gpus := 0, 0
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			switch deviceType(d) {
			case "monitor":
			case "gpu":
				gpus++
				published++
			default:
				published++
			}
		}
	}
	node := fmt.Sprintf(`node=%q`, e.node)
	_, m := e.leader(ctx, t)
	if got := sumMetric(m, "gpudra_devices_published", node); got != float64(published) {
		t.Errorf("gpudra_devices_published on %s = %v, the cluster's slices hold %d devices (monitoring devices aside)", e.node, got, published)
	}
	if got := sumMetric(m, "gpudra_gpus", node, `state="free"`); got != float64(gpus) {
		t.Errorf("gpudra_gpus{state=free} = %v, want %d idle GPUs", got, gpus)
	}

	e.createTemplate(ctx, t, "metrics-gpu", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("metrics-gpu", claimRef{name: "gpu", template: "metrics-gpu"}))
	start := time.Now()
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, m := e.leader(ctx, t)
		return sumMetric(m, "gpudra_devices_allocated", node, `type="gpu"`) == 1 &&
			sumMetric(m, "gpudra_gpus", node, `state="whole"`) == 1 &&
			sumMetric(m, "gpudra_claims_allocated") >= 1, nil
	}); err != nil {
		_, m := e.leader(ctx, t)
		t.Errorf("a running pod's GPU does not show as allocated: %v; allocated=%v whole=%v", err,
			sumMetric(m, "gpudra_devices_allocated", node), sumMetric(m, "gpudra_gpus", node, `state="whole"`))
	}
	record(t, t.Name()+": pod Running → allocation in the metrics", time.Since(start))
	e.deletePods(ctx, t, "metrics-gpu")
	if err := e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, "metrics-gpu", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}

// controllerLeaderElection: of the two replicas exactly one leads and
// exports fleet metrics; when its pod is deleted the other takes over.
func (e *env) controllerLeaderElection(ctx context.Context, t *testing.T) {
	pods := mustControllerPods(ctx, t, e)
	if len(pods) != 2 {
		t.Fatalf("%d controller replicas running, want 2", len(pods))
	}
	leader, lm := e.leader(ctx, t)
	for _, p := range pods {
		if p.Name == leader.Name {
			continue
		}
		m, err := e.metrics(ctx, p, "8080")
		if err != nil {
			t.Fatal(err)
		}
		if sumMetric(m, "gpudra_devices_published") != 0 {
			t.Errorf("follower %s exports fleet metrics", p.Name)
		}
	}
	if sumMetric(lm, "gpudra_devices_published") == 0 {
		t.Error("the leader exports no fleet metrics")
	}

	start := time.Now()
	if err := e.cs.CoreV1().Pods(systemNS).Delete(ctx, leader.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next v1.Pod
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.controllerPods(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Name == leader.Name {
				continue
			}
			m, err := e.metrics(ctx, p, "8080")
			if err == nil && m["gpudra_controller_leader"] == 1 && sumMetric(m, "gpudra_devices_published") > 0 {
				next = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no replica took over after the leader's pod was deleted: %v", err)
	}
	record(t, t.Name()+": leader pod deleted → another replica leads with metrics", time.Since(start))
	t.Logf("leader %s → %s", leader.Name, next.Name)
	// The Deployment brings the second replica back.
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.controllerPods(ctx)
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods {
			if podReady(&p) {
				ready++
			}
		}
		return ready == 2, nil
	}); err != nil {
		t.Errorf("two ready replicas not back: %v", err)
	}
}

// controllerLeftovers checks that uninstalling the chart took what the
// controller made: the certificate Secret (owned by the webhook
// configuration, so the garbage collector removes it) and the Lease.
func (e *env) controllerLeftovers(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		secrets, err := e.cs.CoreV1().Secrets(systemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=gpudra-controller"})
		return err == nil && len(secrets.Items) == 0, err
	}); err != nil {
		t.Errorf("the controller's certificate Secret is left after uninstall: %v", err)
	}
	leases, err := e.cs.CoordinationV1().Leases(systemNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		t.Errorf("Lease %s left after uninstall", l.Name)
	}
	if pods, err := e.controllerPods(ctx); err != nil || len(pods) != 0 {
		t.Errorf("controller pods left after uninstall: %d (%v)", len(pods), err)
	}
}

// configPolicy: on a cluster without the webhook (here: the test namespace
// outside its namespaceSelector), the chart's ValidatingAdmissionPolicy
// refuses a misspelt config in CEL, and lets a valid one through.
func (e *env) configPolicy(ctx context.Context, t *testing.T) {
	sv, err := e.cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	args := e.helmArgs(append([]string{"template", releaseName, e.chart, "-n", systemNS, "--kube-version", sv.GitVersion,
		"--show-only", "templates/config-policy.yaml", "--set", "configPolicy.enabled=true"}, e.chartValues()...)...)
	rendered, err := run(ctx, e.helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kubectlRun(ctx, "apply", "-f", f); err != nil {
		t.Fatalf("the API server refuses the policy: %v", err)
	}
	defer func() {
		if _, err := e.kubectlRun(ctx, "delete", "--ignore-not-found", "-f", f); err != nil {
			t.Error(err)
		}
	}()
	defer e.skipAdmission(ctx, t)()

	manifest := func(name, params string) string {
		return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: %s}}]
      config:
      - opaque:
          driver: %s
          parameters: %s
`, name, testNS, e.driver, e.driver, params)
	}
	apply := func(name, params string) error {
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(manifest(name, params)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := e.kubectlRun(ctx, "apply", "-f", p)
		return err
	}
	start := time.Now()
	var denial error
	// The policy takes a moment to be loaded.
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		denial = apply("policy-typo", `{apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfig, driverCapabilites: [compute]}`)
		if denial == nil {
			_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, "policy-typo", metav1.DeleteOptions{})
		}
		return denial != nil, nil
	}); err != nil {
		t.Fatalf("the policy never refused a misspelt config: %v", err)
	}
	record(t, t.Name()+": policy applied → a misspelt config refused", time.Since(start))
	for _, want := range []string{"ValidatingAdmissionPolicy", "unknown field(s) driverCapabilites"} {
		if !strings.Contains(denial.Error(), want) {
			t.Errorf("the denial does not say %q: %v", want, denial)
		}
	}
	t.Logf("denied: %v", denial)
	if err := apply("policy-valid", `{apiVersion: resource.gpudra.io/v1alpha1, kind: GpuConfig, sharing: {strategy: TimeSlicing}}`); err != nil {
		t.Errorf("the policy refuses a valid config: %v", err)
	}
	_ = e.cs.ResourceV1().ResourceClaimTemplates(testNS).Delete(ctx, "policy-valid", metav1.DeleteOptions{})
}

// deviceType is a published device's type attribute (gpu, mig, monitor).
func deviceType(d resourceapi.Device) string {
	if a, ok := d.Attributes["type"]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// scaleDeployment sets a Deployment of the release to n replicas and waits
// until n are ready and no others are left.
func (e *env) scaleDeployment(ctx context.Context, t *testing.T, name string, n int32) {
	t.Helper()
	deployments := e.cs.AppsV1().Deployments(systemNS)
	// A patch of the scale subresource, not a read-modify-write: the
	// Deployment controller writes the object's status meanwhile, and an
	// update with the resourceVersion read before would conflict.
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := deployments.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scale Deployment %s to %d: %v", name, n, err)
	}
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := e.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
		if err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas == n && len(pods.Items) == int(n), nil
	}); err != nil {
		t.Fatalf("Deployment %s did not get to %d ready replicas: %v", name, n, err)
	}
}

// webhookApartFromFleet: the webhook runs apart from the fleet accounting
// (a Deployment of its own, without informers). With the fleet controller
// gone it still judges configs. With the webhook gone, failurePolicy Fail
// refuses only what it must: a new object with a gpudra config, not a
// label or a finalizer taken off one that exists, so that claims can still
// be changed and deleted while no replica answers.
func (e *env) webhookApartFromFleet(ctx context.Context, t *testing.T) {
	claims := e.cs.ResourceV1().ResourceClaims(testNS)
	gpuConfig := func(params string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "apart-", Namespace: testNS},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: e.driver}}},
				Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
					Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: e.driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}},
			}},
		}
	}
	const valid = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute"]}`
	const typo = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilites":["compute"]}`

	// No fleet controller: the webhook judges as before.
	start := time.Now()
	e.scaleDeployment(ctx, t, controllerName, 0)
	if _, err := claims.Create(ctx, gpuConfig(typo), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), `unknown field "driverCapabilites"`) {
		t.Errorf("with the fleet controller gone, a misspelt config was not denied by the webhook: %v", err)
	}
	e.scaleDeployment(ctx, t, controllerName, 2)
	record(t, t.Name()+": fleet controller scaled to 0 and back, the webhook judging throughout", time.Since(start))

	// No webhook.
	kept, err := claims.Create(ctx, gpuConfig(valid), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept.Finalizers = []string{"gpudra-e2e/hold"}
	if kept, err = claims.Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	e.scaleDeployment(ctx, t, webhookName, 0)
	defer e.scaleDeployment(ctx, t, webhookName, 2)
	var createErr error
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		c, err := claims.Create(ctx, gpuConfig(valid), metav1.CreateOptions{})
		if err == nil {
			_ = claims.Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
		createErr = err
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	}); err != nil {
		t.Errorf("with no webhook replica, a claim with a gpudra config was not refused (failurePolicy Fail): %v", createErr)
	}
	kept.Labels = map[string]string{"gpudra-e2e/changed": "true"}
	if kept, err = claims.Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("with no webhook replica, a label on a claim with a gpudra config was refused: %v", err)
	}
	if err := claims.Delete(ctx, kept.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if kept, err = claims.Get(ctx, kept.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	kept.Finalizers = nil
	if _, err := claims.Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("with no webhook replica, a claim with a gpudra config could not lose its finalizer: %v", err)
	}
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, kept.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the claim was not deleted: %v", err)
	}
	record(t, t.Name()+": webhook scaled to 0: new configs refused, a claim labelled and deleted", time.Since(start))
}
