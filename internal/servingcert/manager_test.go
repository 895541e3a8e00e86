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

package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const (
	testNS     = "gpudra"
	testSecret = "gpudra-controller-webhook-cert"
	testVWC    = "gpudra-controller"
)

func newFakeCluster() *fake.Clientset {
	return fake.NewClientset(&admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testVWC},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "resourceclaims.gpu.gpudra.io"}, {Name: "deviceclasses.gpu.gpudra.io"},
		},
	})
}

func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		switch a.(type) {
		case k8stesting.CreateAction, k8stesting.UpdateAction, k8stesting.PatchAction:
			n++
		}
	}
	return n
}

func injectedBundle(t *testing.T, cs *fake.Clientset) *x509.CertPool {
	t.Helper()
	wc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), testVWC, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, w := range wc.Webhooks {
		if !pool.AppendCertsFromPEM(w.ClientConfig.CABundle) {
			t.Fatalf("webhook %s has no caBundle", w.Name)
		}
	}
	return pool
}

// serve starts an HTTPS server on 127.0.0.1 with the source's certificate.
func serve(t *testing.T, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		TLSConfig: &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// get connects as the API server does: trusting only the bundle, checking
// the service name.
func get(addr string, roots *x509.CertPool, now func() time.Time) (*x509.Certificate, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: testNames[0], MinVersion: tls.VersionTLS12, Time: now},
	}}
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.TLS.PeerCertificates[0], nil
}

func TestManagerRotateAndServe(t *testing.T) {
	ctx := context.Background()
	cs := newFakeCluster()
	now := t0
	clock := func() time.Time { return now }
	cfg := Config{Client: cs, Namespace: testNS, SecretName: testSecret, DNSNames: testNames,
		WebhookConfigurations: []string{testVWC}, Lifetimes: testLife, Now: clock}
	leader, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	follower, _ := NewManager(cfg)

	// A follower before the leader ran: nothing to serve, not ready.
	if err := follower.Load(ctx); err != nil || follower.Ready() {
		t.Fatalf("follower before the Secret exists: ready=%v err=%v", follower.Ready(), err)
	}

	if err := leader.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := writes(cs); got != 2 {
		t.Errorf("first rotation: %d writes, want 2 (create the Secret, inject the bundle)", got)
	}
	if err := follower.Load(ctx); err != nil || !follower.Ready() {
		t.Fatalf("follower after the leader created the Secret: ready=%v err=%v", follower.Ready(), err)
	}
	sec, err := cs.CoreV1().Secrets(testNS).Get(ctx, testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := sec.OwnerReferences; len(o) != 1 || o[0].Kind != "ValidatingWebhookConfiguration" || o[0].Name != testVWC {
		t.Errorf("Secret owners = %+v, want the webhook configuration (so that it goes with the chart)", o)
	}
	roots := injectedBundle(t, cs)
	for name, m := range map[string]*Manager{"leader": leader, "follower": follower} {
		addr := serve(t, m.GetCertificate)
		if _, err := get(addr, roots, clock); err != nil {
			t.Fatalf("%s: the API server's view (the injected caBundle) rejects the served certificate: %v", name, err)
		}
	}

	// Steady state writes nothing.
	before := writes(cs)
	for range 5 {
		now = now.Add(time.Hour)
		if err := leader.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := writes(cs) - before; got != 0 {
		t.Errorf("steady state: %d writes, want 0", got)
	}

	// A serving renewal reaches the follower on its next Load, and the
	// API server's caBundle still trusts it.
	addr := serve(t, follower.GetCertificate)
	first, err := get(addr, roots, clock)
	if err != nil {
		t.Fatal(err)
	}
	now = t0.Add(testLife.Serving * 2 / 3)
	if err := leader.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := follower.Load(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := get(addr, injectedBundle(t, cs), clock)
	if err != nil {
		t.Fatal(err)
	}
	if first.SerialNumber.Cmp(second.SerialNumber) == 0 {
		t.Error("the follower still serves the old certificate after a renewal")
	}

	// Someone deletes the caBundle (e.g. a helm upgrade that replaced the
	// configuration): the next rotation puts it back.
	wc, _ := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testVWC, metav1.GetOptions{})
	wc.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, wc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	injectedBundle(t, cs)
}

func TestFileSourceReloads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(data map[string][]byte) {
		if err := os.WriteFile(certFile, data[KeyCert], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, data[KeyKey], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := mustPlan(t, nil, time.Now())
	write(first)
	src := &FileSource{CertFile: certFile, KeyFile: keyFile}
	if err := src.Load(ctx); err != nil || !src.Ready() {
		t.Fatalf("load: ready=%v err=%v", src.Ready(), err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(first[KeyCABundle])
	addr := serve(t, src.GetCertificate)
	if _, err := get(addr, pool, time.Now); err != nil {
		t.Fatal(err)
	}

	// cert-manager renews (here: a new CA and certificate).
	second, _ := mustPlan(t, nil, time.Now())
	write(second)
	if err := src.Load(ctx); err != nil {
		t.Fatal(err)
	}
	pool2 := x509.NewCertPool()
	pool2.AppendCertsFromPEM(second[KeyCABundle])
	if _, err := get(addr, pool2, time.Now); err != nil {
		t.Fatalf("renewed certificate not served: %v", err)
	}

	// A half-written renewal keeps the last good certificate.
	if err := os.WriteFile(keyFile, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, first[KeyCert], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := src.Load(ctx); err == nil {
		t.Fatal("a certificate whose key does not match was loaded")
	}
	if _, err := get(addr, pool2, time.Now); err != nil {
		t.Fatalf("last good certificate no longer served: %v", err)
	}
}
