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

package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/admission"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/servingcert"
)

const testDriver = "gpu.gpudra.io"

// replica is one running controller in the test.
type replica struct {
	metricsURL string
	cancel     context.CancelFunc
	done       chan error
}

func startReplica(t *testing.T, cs *fake.Clientset, identity string, leaderElection bool) *replica {
	t.Helper()
	return startReplicaOf(t, cs, identity, leaderElection, true)
}

// startReplicaOf starts a replica that serves the webhook, and runs the
// fleet accounting when fleetAccounting.
func startReplicaOf(t *testing.T, cs *fake.Clientset, identity string, leaderElection, fleetAccounting bool) *replica {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.LoggerWithValues(logger, "replica", identity)))
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	certs, err := servingcert.NewManager(servingcert.Config{Client: cs, Namespace: "gpudra", SecretName: "cert",
		DNSNames: []string{"gpudra-controller.gpudra.svc"}, WebhookConfigurations: []string{"gpudra-controller"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		DriverName: testDriver, Client: cs, Namespace: "gpudra", Identity: identity,
		MetricsListener: ml, WebhookListener: wl, Certificates: certs,
		CertReload: 100 * time.Millisecond, CertRotate: time.Hour,
		RecomputeInterval: 50 * time.Millisecond,
		FleetAccounting:   fleetAccounting,
	}
	if leaderElection {
		cfg.LeaseName, cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = "gpudra-controller", 2*time.Second, time.Second, 200*time.Millisecond
	}
	r := &replica{metricsURL: "http://" + ml.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("controller did not stop")
		}
	})
	return r
}

func (r *replica) get(path string) (int, string, error) {
	resp, err := http.Get(r.metricsURL + path)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// scrape returns every sample as "name{labels}" → value.
func (r *replica) scrape(t *testing.T) gpudratest.Samples {
	t.Helper()
	code, body, err := r.get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape: %d %v", code, err)
	}
	m, err := gpudratest.ParseText([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func newCluster() *fake.Clientset {
	node := "node-a"
	model := "NVIDIA H100 80GB HBM3"
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	dev := func(i int) resourceapi.Device {
		return resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": str("gpu"), "productName": str(model), "uuid": str(fmt.Sprintf("GPU-%d", i))}}
	}
	return fake.NewClientset(
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gpudra-controller"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "resourceclaims.gpu.gpudra.io"}}},
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a-gpu"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: testDriver, NodeName: &node, Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{dev(0), dev(1)}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
	)
}

// gpuSeries is the series of node-a's whole GPUs with the given sharing
// label.
func gpuSeries(sharing string) string {
	return `{model="NVIDIA H100 80GB HBM3",node="node-a",profile="",sharing="` + sharing + `",type="gpu"}`
}

func TestControllerMetricsFollowTheCluster(t *testing.T) {
	cs := newCluster()
	r := startReplica(t, cs, "only", false)

	waitFor(t, "ready", func() bool { code, _, _ := r.get("/readyz"); return code == http.StatusOK })
	waitFor(t, "published devices", func() bool { return r.scrape(t)[MetricDevicesPublished.Name+gpuSeries("exclusive")] == 2 })
	m := r.scrape(t)
	if v, ok := m[MetricDevicesAllocated.Name+gpuSeries("none")]; !ok || v != 0 || m[MetricGPUs.Name+`{model="NVIDIA H100 80GB HBM3",node="node-a",state="free"}`] != 2 || m[MetricLeader.Name] != 1 {
		t.Errorf("before any claim: %v", m)
	}
	if m[MetricCertificateExpiry.Name] < float64(time.Now().Unix()) {
		t.Errorf("certificate expiry %v is not in the future", m[MetricCertificateExpiry.Name])
	}

	// A claim gets gpu-1 and asks for MPS: the next recompute shows it.
	mps := resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: testDriver,
			Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)}}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: "node-a", Device: "gpu-1"}},
			Config:  []resourceapi.DeviceAllocationConfiguration{mps}}}}}
	if _, err := cs.ResourceV1().ResourceClaims("ns").Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "allocated device", func() bool { return r.scrape(t)[MetricDevicesAllocated.Name+gpuSeries("MPS")] == 1 })
	m = r.scrape(t)
	if _, ok := m[MetricDevicesAllocated.Name+gpuSeries("none")]; ok {
		t.Errorf("a sharing=none series beside the MPS one: %v", m)
	}
	if m[MetricClaimsAllocated.Name] != 1 || m[MetricGPUs.Name+`{model="NVIDIA H100 80GB HBM3",node="node-a",state="whole"}`] != 1 {
		t.Errorf("after the claim: %v", m)
	}

	// A pod waits for two GPUs where one is free: it is unsatisfiable,
	// and the free GPU is stranded.
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.gpudra.io"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == 'gpu.gpudra.io'"}}}}}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	two := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.gpudra.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}
	if _, err := cs.ResourceV1().ResourceClaims("ns").Create(ctx, two, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits"},
		Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("two")}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranded := MetricGPUsStranded.Name + `{model="NVIDIA H100 80GB HBM3",node="node-a"}`
	waitFor(t, "the stranded GPU", func() bool { return r.scrape(t)[stranded] == 1 })
	m = r.scrape(t)
	if m[MetricPodsPending.Name] != 1 || m[MetricPodsUnsatisfiable.Name] != 1 || m[MetricClaimsPending.Name] != 1 {
		t.Errorf("pending pods %v, unsatisfiable %v, pending claims %v; want 1, 1, 1",
			m[MetricPodsPending.Name], m[MetricPodsUnsatisfiable.Name], m[MetricClaimsPending.Name])
	}
}

func TestLeaderElection(t *testing.T) {
	cs := newCluster()
	a := startReplica(t, cs, "a", true)
	b := startReplica(t, cs, "b", true)

	leaderOf := func() (leader, follower *replica) {
		ma, mb := a.scrape(t), b.scrape(t)
		switch {
		case ma[MetricLeader.Name] == 1 && mb[MetricLeader.Name] == 0:
			return a, b
		case mb[MetricLeader.Name] == 1 && ma[MetricLeader.Name] == 0:
			return b, a
		}
		return nil, nil
	}
	var leader, follower *replica
	waitFor(t, "one leader", func() bool { leader, follower = leaderOf(); return leader != nil })
	waitFor(t, "fleet metrics on the leader", func() bool { return leader.scrape(t)[MetricDevicesPublished.Name+gpuSeries("exclusive")] == 2 })
	if _, ok := follower.scrape(t)[MetricDevicesPublished.Name+gpuSeries("exclusive")]; ok {
		t.Error("the follower exports fleet metrics too; a sum over replicas would count devices twice")
	}
	// Both serve the webhook: both become ready once the leader created
	// the certificate.
	for _, r := range []*replica{a, b} {
		waitFor(t, "ready", func() bool { code, _, _ := r.get("/readyz"); return code == http.StatusOK })
	}

	// The leader goes away; the follower takes over.
	leader.cancel()
	select {
	case err := <-leader.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("leader stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leader did not stop")
	}
	leader.done <- nil // for the cleanup
	waitFor(t, "the follower to lead", func() bool {
		m := follower.scrape(t)
		return m[MetricLeader.Name] == 1 && m[MetricDevicesPublished.Name+gpuSeries("exclusive")] == 2
	})
}

// TestReviewCountersFromStart: every kind and result of the review counter
// is exported at 0 before the first review, so that increase() sees the
// first error; a kind the webhook does not validate counts as "other".
func TestReviewCountersFromStart(t *testing.T) {
	m := newMetrics(false, true)
	if n, err := testutil.GatherAndCount(m.registry, MetricAdmissionReviews.Name); err != nil || n != 4*3+1 {
		t.Fatalf("%s: %d series before any review (%v), want 4 kinds × 3 results and other/refused", MetricAdmissionReviews.Name, n, err)
	}
	if got := testutil.ToFloat64(m.reviews.WithLabelValues("ResourceClaim", "error")); got != 0 {
		t.Errorf("ResourceClaim errors before any review = %v", got)
	}
	m.observeReview("Pod", admission.Errored, time.Millisecond)
	if got := testutil.ToFloat64(m.reviews.WithLabelValues(kindOther, "error")); got != 1 {
		t.Errorf("an error review of a Pod counted %v times under kind=other, want 1", got)
	}
	m.observeReview("", admission.Refused, time.Millisecond)
	if got := testutil.ToFloat64(m.reviews.WithLabelValues(kindOther, "refused")); got != 1 {
		t.Errorf("a refused request counted %v times under kind=other, want 1", got)
	}
	if n, _ := testutil.GatherAndCount(m.registry, MetricAdmissionReviews.Name); n != 4*3+1 {
		t.Errorf("%d series after reviews of an unknown kind, want still 13", n)
	}
}

// TestWebhookAlone: a replica that serves the webhook without the fleet
// accounting becomes ready, renews the certificate as leader, and never
// lists what the accounting reads: its memory does not grow with the
// fleet, so the fleet cannot take the webhook down with it.
func TestWebhookAlone(t *testing.T) {
	cs := newCluster()
	r := startReplicaOf(t, cs, "webhook", true, false)
	waitFor(t, "ready", func() bool { code, _, _ := r.get("/readyz"); return code == http.StatusOK })
	m := r.scrape(t)
	if m[MetricCertificateExpiry.Name] < float64(time.Now().Unix()) {
		t.Errorf("certificate expiry %v is not in the future", m[MetricCertificateExpiry.Name])
	}
	for k := range m {
		if strings.HasPrefix(k, "gpudra_devices") || strings.HasPrefix(k, "gpudra_fleet") || strings.HasPrefix(k, MetricLeader.Name) {
			t.Errorf("a webhook-only replica exports %s", k)
		}
	}
	time.Sleep(200 * time.Millisecond) // several recompute intervals
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			t.Errorf("a webhook-only replica did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestServingFailureGivesTheLeaseUp: when a server stops on its own, Run
// returns its error, and by then this replica has given its lease up, so
// that another leads at once rather than after the lease expires (the
// elector used to be waited for before it was told to stop).
func TestServingFailureGivesTheLeaseUp(t *testing.T) {
	cs := newCluster()
	_, ctx := ktesting.NewTestContext(t)
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		DriverName: testDriver, Client: cs, Namespace: "gpudra", Identity: "a",
		MetricsListener: ml, FleetAccounting: true, RecomputeInterval: 50 * time.Millisecond,
		LeaseName: "gpudra-controller", LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 100 * time.Millisecond,
	}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	holder := func() string {
		l, err := cs.CoordinationV1().Leases("gpudra").Get(ctx, "gpudra-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	waitFor(t, "the lease", func() bool { return holder() == "a" })

	start := time.Now()
	_ = ml.Close() // the metrics server stops on its own
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "serving") {
			t.Errorf("Run: %v, want the serving error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to return", d)
	}
	if h := holder(); h != "" {
		t.Errorf("the lease is still held by %q after Run returned: another replica waits for it to expire", h)
	}
}
