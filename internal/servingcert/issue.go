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
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// backdate is how far before "now" a certificate becomes valid, so that an
// API server whose clock is a little behind accepts it at once.
const backdate = time.Hour

// newKey makes a P-256 key: as strong as RSA-3072 for a TLS handshake, and
// cheap to generate in tests and on start-up.
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// issueCA makes a self-signed CA valid from now-backdate for lifetime.
// client-go's cert.NewSelfSignedCACert would do, but fixes the lifetime at
// ten years from the wall clock: the rotation plan needs the lifetime it
// is given and the time it is told (DefaultLifetimes, and short ones in
// tests).
func issueCA(commonName string, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign CA: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// issueServing makes a serving certificate for dnsNames signed by the CA,
// valid from now-backdate for lifetime (but not beyond the CA).
func issueServing(ca *x509.Certificate, caKey crypto.Signer, dnsNames []string, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// encodeKey writes a key as PEM (keyutil picks the block type).
func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	out, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return out, nil
}

// parseCerts reads every certificate of a PEM bundle (client-go's parser:
// it skips blocks that are not certificates, fails on none).
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	return cert.ParseCertsPEM(data)
}

// parseKey reads a PEM private key of any type Go's TLS stack signs with
// (EC, PKCS#1 RSA, PKCS#8), with client-go's parser.
func parseKey(data []byte) (crypto.Signer, error) {
	k, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

// encodeCerts writes certificates as one PEM bundle.
func encodeCerts(certs []*x509.Certificate) []byte {
	out, _ := cert.EncodeCertificates(certs...) // fails only on a nil certificate
	return out
}
