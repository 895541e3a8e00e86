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

package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/servingcert"
)

const driver = "gpu.gpudra.io"

// params are opaque parameters as a user writes them.
func params(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

const (
	goodGpu    = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","graphics"]}`
	goodMig    = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig"}`
	typo       = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilites":["compute"]}`
	badValue   = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","cuda","compute"]}`
	badKind    = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfg"}`
	sharing    = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50}}}`
	badSharing = `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":150}}}`
	otherAPI   = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`
	notAnObjct = `["compute"]`
)

func claim(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.gpudra.io"}}},
			Config:   configs,
		}},
	}
}

func opaque(drv, p string) resourceapi.DeviceClaimConfiguration {
	return gpudratest.Opaque(drv, p)
}

func template(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "team-a"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claim(configs...).Spec},
	}
}

func class(p string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-graphics.gpudra.io"},
		Spec:       resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: gpudratest.OpaqueConfig(driver, p)}}},
	}
}

func claimV1beta1(p string) *resourcev1beta1.ResourceClaim {
	return &resourcev1beta1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1beta1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "team-a"},
		Spec: resourcev1beta1.ResourceClaimSpec{Devices: resourcev1beta1.DeviceClaim{
			Requests: []resourcev1beta1.DeviceRequest{{Name: "gpu", DeviceClassName: "gpu.gpudra.io"}},
			Config: []resourcev1beta1.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1beta1.DeviceConfiguration{
				Opaque: &resourcev1beta1.OpaqueDeviceConfiguration{Driver: driver, Parameters: params(p)}}}},
		}},
	}
}

func templateV1beta2(p string) *resourcev1beta2.ResourceClaimTemplate {
	return &resourcev1beta2.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1beta2", Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "t2", Namespace: "team-a"},
		Spec: resourcev1beta2.ResourceClaimTemplateSpec{Spec: resourcev1beta2.ResourceClaimSpec{Devices: resourcev1beta2.DeviceClaim{
			Config: []resourcev1beta2.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1beta2.DeviceConfiguration{
				Opaque: &resourcev1beta2.OpaqueDeviceConfiguration{Driver: driver, Parameters: params(p)}}}},
		}}},
	}
}

// review builds an AdmissionReview as the API server sends it.
func review(t *testing.T, op admissionv1.Operation, obj, old runtime.Object) []byte {
	t.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	meta := obj.(metav1.Object)
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("req-" + meta.GetName()),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"},
		Name:      meta.GetName(),
		Namespace: meta.GetNamespace(),
		Operation: op,
		Object:    runtime.RawExtension{Raw: mustJSON(t, obj)},
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return mustJSON(t, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// webhook is a webhook served over HTTPS on 127.0.0.1 with a certificate
// from servingcert, and a client that trusts it the way the API server
// does (through the injected caBundle).
type webhook struct {
	url, addr string
	client    *http.Client
	// tls is the client's TLS configuration.
	tls *tls.Config
}

func startWebhook(t *testing.T, observe func(string, Result, time.Duration)) (string, *http.Client) {
	t.Helper()
	w := startWebhookWith(t, observe, DefaultLimits())
	return w.url, w.client
}

func startWebhookWith(t *testing.T, observe func(string, Result, time.Duration), limits Limits) *webhook {
	t.Helper()
	ctx := context.Background()
	const vwc = "gpudra-controller"
	cs := fake.NewClientset()
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhookConfig(vwc), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"gpudra-controller.gpudra.svc"}
	m, err := servingcert.NewManager(servingcert.Config{Client: cs, Namespace: "gpudra", SecretName: "cert",
		DNSNames: names, WebhookConfigurations: []string{vwc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	wc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vwc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wc.Webhooks[0].ClientConfig.CABundle)

	h, err := NewHandler(Validator{DriverName: driver}, limits)
	if err != nil {
		t.Fatal(err)
	}
	h.Observe = observe
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, &tls.Config{GetCertificate: m.GetCertificate, MinVersion: tls.VersionTLS12}, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	w := &webhook{url: "https://" + ln.Addr().String() + ValidatePath, addr: ln.Addr().String(),
		tls: &tls.Config{RootCAs: roots, ServerName: names[0], MinVersion: tls.VersionTLS12}}
	w.client = w.newClient()
	return w
}

// newClient returns a client with connections of its own.
func (w *webhook) newClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: w.tls, ForceAttemptHTTP2: true}}
}

// newHandler is NewHandler for limits known to be valid.
func newHandler(v Validator, limits Limits) http.Handler {
	h, err := NewHandler(v, limits)
	if err != nil {
		panic(err)
	}
	return h
}

func TestWebhookOverHTTPS(t *testing.T) {
	observed := map[Result]int{}
	url, client := startWebhook(t, func(_ string, r Result, _ time.Duration) { observed[r]++ })

	for _, tc := range []struct {
		name string
		body []byte
		// allowed, or the substrings the denial must contain.
		allowed bool
		want    []string
		field   string
	}{
		{name: "claim without config", body: review(t, admissionv1.Create, claim(), nil), allowed: true},
		{name: "valid GpuConfig", body: review(t, admissionv1.Create, claim(opaque(driver, goodGpu)), nil), allowed: true},
		{name: "sharing, a field the config API gained: validated without a change here", body: review(t, admissionv1.Create, claim(opaque(driver, sharing)), nil), allowed: true},
		{name: "invalid sharing", body: review(t, admissionv1.Create, claim(opaque(driver, badSharing)), nil),
			want: []string{"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"}},
		{name: "a config full of mistakes: the first ten and a count", body: review(t, admissionv1.Create, claim(opaque(driver,
			`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o"]}`)), nil),
			want: []string{"driverCapabilities[9]: Unsupported value", "spec.devices.config[0].opaque.parameters: and 5 more errors"}},
		{name: "an MPS limit keyed by a device the plugin never gives a claim: denied, as the prepare would fail (claimplan.DecodeConfig)", body: review(t, admissionv1.Create, claim(opaque(driver,
			`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"1":"10Gi"}}}}`)), nil),
			want: []string{`spec.devices.config[0].opaque.parameters.sharing.mps.perDevicePinnedMemoryLimits[1]: key "1" can never name the claim's MPS device`}},
		{name: "an MPS limit keyed by the claim's one device", body: review(t, admissionv1.Create, claim(opaque(driver,
			`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"0":"10Gi"}}}}`)), nil), allowed: true},
		{name: "valid MigConfig", body: review(t, admissionv1.Create, claim(opaque(driver, goodMig)), nil), allowed: true},
		{name: "another driver's config is not ours to judge", body: review(t, admissionv1.Create,
			claim(opaque("gpu.nvidia.com", otherAPI), opaque("gpu.nvidia.com", notAnObjct)), nil), allowed: true},
		{name: "misspelt field", body: review(t, admissionv1.Create, claim(opaque("gpu.nvidia.com", otherAPI), opaque(driver, typo)), nil),
			want: []string{"ResourceClaim team-a/c", `spec.devices.config[1].opaque.parameters: unknown field "driverCapabilites"`}},
		{name: "unsupported and duplicate values, all reported", body: review(t, admissionv1.Create, claim(opaque(driver, badValue)), nil),
			want: []string{`spec.devices.config[0].opaque.parameters.driverCapabilities[1]: Unsupported value: "cuda": supported values:`,
				`spec.devices.config[0].opaque.parameters.driverCapabilities[2]: Duplicate value: "compute"`},
			field: "spec.devices.config[0].opaque.parameters.driverCapabilities[1]"},
		{name: "unknown kind names the known ones", body: review(t, admissionv1.Create, claim(opaque(driver, badKind)), nil),
			want: []string{`spec.devices.config[0].opaque.parameters.kind: "GpuConfg" is not known`, "GpuConfig, MigConfig"}},
		{name: "another API under our driver", body: review(t, admissionv1.Create, claim(opaque(driver, otherAPI)), nil),
			want: []string{`spec.devices.config[0].opaque.parameters.apiVersion: Unsupported value: "resource.nvidia.com/v1beta1"`}},
		{name: "parameters that are not an object", body: review(t, admissionv1.Create, claim(opaque(driver, notAnObjct)), nil),
			want: []string{"spec.devices.config[0].opaque.parameters"}},
		{name: "template", body: review(t, admissionv1.Create, template(opaque(driver, typo)), nil),
			want: []string{"ResourceClaimTemplate team-a/t", `spec.spec.devices.config[0].opaque.parameters: unknown field`}},
		{name: "valid template", body: review(t, admissionv1.Create, template(opaque(driver, goodGpu)), nil), allowed: true},
		{name: "device class", body: review(t, admissionv1.Create, class(badValue), nil),
			want: []string{"DeviceClass gpu-graphics.gpudra.io", `spec.config[0].opaque.parameters.driverCapabilities[1]`}},
		{name: "valid device class", body: review(t, admissionv1.Create, class(goodGpu), nil), allowed: true},
		{name: "v1beta1 claim", body: review(t, admissionv1.Create, claimV1beta1(typo), nil),
			want: []string{"ResourceClaim team-a/old", `spec.devices.config[0].opaque.parameters: unknown field`}},
		{name: "valid v1beta1 claim", body: review(t, admissionv1.Create, claimV1beta1(goodGpu), nil), allowed: true},
		{name: "v1beta2 template", body: review(t, admissionv1.Create, templateV1beta2(badKind), nil),
			want: []string{`spec.spec.devices.config[0].opaque.parameters.kind`}},
		{name: "update that keeps an old bad config (e.g. removing a finalizer)", body: review(t, admissionv1.Update,
			claim(opaque(driver, typo)), claim(opaque(driver, typo))), allowed: true},
		{name: "update that changes a config to a bad one", body: review(t, admissionv1.Update,
			template(opaque(driver, typo)), template(opaque(driver, goodGpu))), want: []string{"unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, client, url, tc.body)
			var in admissionv1.AdmissionReview
			_ = json.Unmarshal(tc.body, &in)
			if resp.UID != in.Request.UID {
				t.Errorf("response UID %q, want the request's %q", resp.UID, in.Request.UID)
			}
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v; result: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.allowed {
				return
			}
			if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
				t.Errorf("code %d reason %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message lacks %q:\n%s", w, resp.Result.Message)
				}
			}
			for _, c := range resp.Result.Details.Causes {
				// kubectl prints "<field>: <message>"; the message must
				// not say the path again.
				if strings.HasPrefix(c.Message, "spec") || strings.HasPrefix(c.Message, "parameters") {
					t.Errorf("cause %s repeats its path: %q", c.Field, c.Message)
				}
			}
			if tc.field != "" {
				found := false
				for _, c := range resp.Result.Details.Causes {
					found = found || c.Field == tc.field
				}
				if !found {
					t.Errorf("no cause for field %s: %+v", tc.field, resp.Result.Details.Causes)
				}
			}
		})
	}
	if observed[Allowed] == 0 || observed[Denied] == 0 {
		t.Errorf("observer saw %v", observed)
	}
}

func post(t *testing.T, client *http.Client, url string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	r, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("HTTP %d: %s", r.StatusCode, b)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("response is not an AdmissionReview v1 with a response: %+v", out)
	}
	return out.Response
}

func TestWebhookRejectsBadRequests(t *testing.T) {
	url, client := startWebhook(t, nil)
	good := review(t, admissionv1.Create, claim(), nil)
	for _, tc := range []struct {
		name        string
		contentType string
		body        []byte
		status      int
	}{
		{"wrong content type", "text/plain", good, http.StatusUnsupportedMediaType},
		{"not JSON", "application/json", []byte("{"), http.StatusBadRequest},
		{"v1beta1 AdmissionReview", "application/json", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v1beta1"), 1), http.StatusBadRequest},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"too large", "application/json", bytes.Repeat([]byte(" "), maxRequestBytes+10), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := client.Post(url, tc.contentType, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_ = r.Body.Close()
			if r.StatusCode != tc.status {
				t.Errorf("HTTP %d, want %d", r.StatusCode, tc.status)
			}
		})
	}
	t.Run("a kind the webhook does not know is an error, not an approval", func(t *testing.T) {
		pod := review(t, admissionv1.Create, claim(), nil)
		pod = bytes.Replace(pod, []byte(`"kind":"ResourceClaim"`), []byte(`"kind":"ResourceSlice"`), 1)
		resp := post(t, client, url, pod)
		if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("allowed=%v result=%+v", resp.Allowed, resp.Result)
		}
	})
	t.Run("DELETE is allowed", func(t *testing.T) {
		resp := post(t, client, url, review(t, admissionv1.Delete, claim(opaque(driver, typo)), nil))
		if !resp.Allowed {
			t.Errorf("DELETE refused: %+v", resp.Result)
		}
	})
}

func webhookConfig(name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "resourceclaims." + driver}},
	}
}
