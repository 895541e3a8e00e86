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
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"slices"
	"strings"
	"time"
)

// Keys of the Secret's data.
const (
	KeyCert     = "tls.crt"       // serving certificate
	KeyKey      = "tls.key"       // its key
	KeyCA       = "ca.crt"        // the CA that signs new serving certificates
	KeyCAKey    = "ca.key"        // its key
	KeyCABundle = "ca-bundle.crt" // every CA the API server is to trust
)

// Lifetimes are how long certificates live and how long a new CA waits
// before it signs.
type Lifetimes struct {
	// CA is how long a CA is valid; it is renewed with a third left.
	CA time.Duration
	// Serving is how long a serving certificate is valid; it is renewed
	// with a third left.
	Serving time.Duration
	// CAPropagation is how long a new CA is only trusted, not used, so
	// that the caBundle with it reaches the API server before any
	// replica serves a certificate it signed.
	CAPropagation time.Duration
}

// DefaultLifetimes: a CA for three years, serving certificates for one
// year; a renewed CA signs after ten minutes.
var DefaultLifetimes = Lifetimes{CA: 3 * 365 * 24 * time.Hour, Serving: 365 * 24 * time.Hour, CAPropagation: 10 * time.Minute}

// plan returns the Secret data that should be stored, given what is stored
// (nil or partial for a fresh install, possibly corrupt) and the time; and
// why it changed ("" when data is already right).
func plan(data map[string][]byte, dnsNames []string, now time.Time, lt Lifetimes) (map[string][]byte, string, error) {
	var reasons []string
	next := map[string][]byte{}
	for k, v := range data {
		next[k] = v
	}

	// The signing CA.
	ca, caKey := parsePair(data[KeyCA], data[KeyCAKey])
	if ca == nil || !ca.IsCA || !matches(ca, caKey) || renewalDue(ca, now) {
		switch {
		case ca == nil:
			reasons = append(reasons, "no usable CA")
		default:
			reasons = append(reasons, "CA expires "+ca.NotAfter.UTC().Format(time.RFC3339))
		}
		certPEM, keyPEM, err := issueCA("gpudra-controller webhook CA", now, lt.CA)
		if err != nil {
			return nil, "", err
		}
		next[KeyCA], next[KeyCAKey] = certPEM, keyPEM
		ca, caKey = parsePair(certPEM, keyPEM)
	}

	// The bundle: the signing CA and every other CA still valid, so
	// serving certificates an older CA signed stay trusted until they
	// are replaced.
	bundle := []*x509.Certificate{ca}
	if old, err := parseCerts(data[KeyCABundle]); err == nil {
		for _, c := range old {
			if c.IsCA && now.Before(c.NotAfter) && !bytes.Equal(c.Raw, ca.Raw) {
				bundle = append(bundle, c)
			}
		}
	}
	if b := encodeCerts(bundle); !bytes.Equal(b, data[KeyCABundle]) {
		next[KeyCABundle] = b
		if len(reasons) == 0 {
			reasons = append(reasons, "CA bundle changed")
		}
	}

	// The serving certificate. While a renewed CA propagates, a serving
	// certificate that is still valid is kept even when due: one signed
	// by the new CA could reach a replica before the API server trusts it.
	leaf, leafKey := parsePair(data[KeyCert], data[KeyKey])
	propagated := now.Sub(ca.NotBefore.Add(backdate)) >= lt.CAPropagation
	reissue := ""
	switch {
	case leaf == nil || !matches(leaf, leafKey) || now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter):
		reissue = "no usable serving certificate"
	case !slices.Equal(leaf.DNSNames, dnsNames):
		reissue = "serving certificate is for " + strings.Join(leaf.DNSNames, ",")
	case !signedByAny(leaf, bundle):
		reissue = "serving certificate's CA is no longer trusted"
	case !propagated:
	case renewalDue(leaf, now):
		reissue = "serving certificate expires " + leaf.NotAfter.UTC().Format(time.RFC3339)
	case !signedBy(leaf, ca):
		reissue = "switching to the renewed CA"
	}
	if reissue != "" {
		certPEM, keyPEM, err := issueServing(ca, caKey, dnsNames, now, lt.Serving)
		if err != nil {
			return nil, "", err
		}
		next[KeyCert], next[KeyKey] = certPEM, keyPEM
		reasons = append(reasons, reissue)
	}
	return next, strings.Join(reasons, "; "), nil
}

// parsePair reads a certificate and its key; nil when either is missing or
// unreadable.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, nil
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil
	}
	return certs[0], key
}

// matches reports whether key is the private key of cert.
func matches(cert *x509.Certificate, key crypto.Signer) bool {
	switch pub := cert.PublicKey.(type) {
	case *ecdsa.PublicKey:
		return pub.Equal(key.Public())
	case *rsa.PublicKey:
		return pub.Equal(key.Public())
	default:
		return false
	}
}

// renewalDue is true once less than a third of the certificate's lifetime
// is left (or it is not yet or no longer valid).
func renewalDue(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.Before(c.NotBefore) || now.After(c.NotAfter.Add(-life/3))
}

func signedBy(c, ca *x509.Certificate) bool {
	return c.CheckSignatureFrom(ca) == nil
}

func signedByAny(c *x509.Certificate, cas []*x509.Certificate) bool {
	return slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return signedBy(c, ca) })
}
