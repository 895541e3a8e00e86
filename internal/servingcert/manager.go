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
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Config says where the certificate lives and who must trust it.
type Config struct {
	Client kubernetes.Interface
	// Namespace and SecretName locate the Secret.
	Namespace  string
	SecretName string
	// DNSNames are the names the API server reaches the webhook by:
	// <service>.<namespace>.svc first.
	DNSNames []string
	// WebhookConfigurations are the ValidatingWebhookConfigurations
	// whose webhooks get the caBundle.
	WebhookConfigurations []string
	Lifetimes             Lifetimes
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Manager keeps the webhook's serving certificate: Rotate (on the leader)
// creates and renews it and injects the CA bundle; Load (on every replica)
// picks up what is stored; GetCertificate serves it.
type Manager struct {
	cfg     Config
	current atomic.Pointer[tls.Certificate]
}

// NewManager checks the config; it touches no API.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.SecretName == "" || len(cfg.DNSNames) == 0 {
		return nil, errors.New("servingcert: client, namespace, secret name and DNS names are required")
	}
	if cfg.Lifetimes == (Lifetimes{}) {
		cfg.Lifetimes = DefaultLifetimes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg}, nil
}

// GetCertificate serves the current certificate; use it as
// tls.Config.GetCertificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate loaded yet")
}

// Ready reports whether a certificate is loaded.
func (m *Manager) Ready() bool { return m.current.Load() != nil }

// Load reads the Secret and serves what it holds. A Secret that does not
// exist yet is not an error: the leader is about to create it.
func (m *Manager) Load(ctx context.Context) error {
	s, err := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace).Get(ctx, m.cfg.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
	}
	return m.use(ctx, s.Data)
}

// use serves the certificate in data if it differs from the current one.
func (m *Manager) use(ctx context.Context, data map[string][]byte) error {
	if cur := m.current.Load(); cur != nil && len(cur.Certificate) > 0 {
		if certs, err := parseCerts(data[KeyCert]); err == nil && bytes.Equal(certs[0].Raw, cur.Certificate[0]) {
			return nil
		}
	}
	cert, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		return fmt.Errorf("the certificate in Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
	}
	m.current.Store(&cert)
	klog.FromContext(ctx).Info("Serving certificate loaded", "secret", m.cfg.Namespace+"/"+m.cfg.SecretName,
		"notAfter", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// Rotate brings the Secret up to date (creating it, renewing what is due),
// serves the result and injects the CA bundle into the webhook
// configurations. Run it on one replica at a time (the leader); a
// concurrent writer makes it fail with a conflict, and the next run picks
// up the winner's Secret.
func (m *Manager) Rotate(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	secrets := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace)
	s, err := secrets.Get(ctx, m.cfg.SecretName, metav1.GetOptions{})
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
	}
	var data map[string][]byte
	if exists {
		data = s.Data
	}
	next, reason, err := plan(data, m.cfg.DNSNames, m.cfg.Now(), m.cfg.Lifetimes)
	if err != nil {
		return err
	}
	switch {
	case !exists:
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.cfg.SecretName, Namespace: m.cfg.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "gpudra-controller"}},
			Type: corev1.SecretTypeTLS,
			Data: next,
		}
		// Owned by the webhook configuration, so that the Secret goes
		// with it when the chart is uninstalled; nobody else would
		// delete what the controller created.
		if owner, err := m.owner(ctx); err != nil {
			return err
		} else if owner != nil {
			s.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if s, err = secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
		}
		logger.Info("Created the webhook's serving certificate", "secret", m.cfg.Namespace+"/"+m.cfg.SecretName, "dnsNames", m.cfg.DNSNames)
	case reason != "":
		s = s.DeepCopy()
		s.Data = next
		if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
		}
		logger.Info("Renewed the webhook's certificates", "secret", m.cfg.Namespace+"/"+m.cfg.SecretName, "reason", reason)
	}
	if err := m.use(ctx, s.Data); err != nil {
		return err
	}
	return m.inject(ctx, s.Data[KeyCABundle])
}

// owner is a reference to the first webhook configuration, or nil when
// there is none to inject into.
func (m *Manager) owner(ctx context.Context) (*metav1.OwnerReference, error) {
	if len(m.cfg.WebhookConfigurations) == 0 {
		return nil, nil
	}
	name := m.cfg.WebhookConfigurations[0]
	wc, err := m.cfg.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read ValidatingWebhookConfiguration %s (the certificate Secret's owner): %w", name, err)
	}
	return &metav1.OwnerReference{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration", Name: wc.Name, UID: wc.UID}, nil
}

// inject sets caBundle on every webhook of the configured webhook
// configurations, writing only those that differ.
func (m *Manager) inject(ctx context.Context, bundle []byte) error {
	api := m.cfg.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	var errs []error
	for _, name := range m.cfg.WebhookConfigurations {
		wc, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", name, err))
			continue
		}
		changed := false
		for i := range wc.Webhooks {
			if !bytes.Equal(wc.Webhooks[i].ClientConfig.CABundle, bundle) {
				wc.Webhooks[i].ClientConfig.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			continue
		}
		if _, err := api.Update(ctx, wc, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("inject caBundle into ValidatingWebhookConfiguration %s: %w", name, err))
			continue
		}
		klog.FromContext(ctx).Info("Injected the CA bundle", "validatingWebhookConfiguration", name)
	}
	return errors.Join(errs...)
}
