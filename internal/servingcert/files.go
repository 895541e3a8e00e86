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
	"os"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// FileSource serves a certificate and key from files that someone else
// renews, such as a Secret that cert-manager fills, mounted into the pod.
type FileSource struct {
	CertFile, KeyFile string

	mu      sync.Mutex
	certPEM []byte
	current atomic.Pointer[tls.Certificate]
}

// Load (re-)reads the files and serves their content if it changed. A
// half-written pair (the kubelet swaps a Secret volume atomically, but a
// renewal may land between two reads) fails and keeps the old one.
func (f *FileSource) Load(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return fmt.Errorf("read serving certificate: %w", err)
	}
	if bytes.Equal(certPEM, f.certPEM) && f.current.Load() != nil {
		return nil
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return fmt.Errorf("read serving key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("serving certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	f.certPEM = certPEM
	f.current.Store(&cert)
	klog.FromContext(ctx).Info("Serving certificate loaded", "file", f.CertFile, "notAfter", cert.Leaf.NotAfter)
	return nil
}

// GetCertificate serves the current certificate.
func (f *FileSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := f.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate loaded yet")
}

// Ready reports whether a certificate is loaded.
func (f *FileSource) Ready() bool { return f.current.Load() != nil }
