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
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

var (
	testNames = []string{"gpudra-controller.gpudra.svc", "gpudra-controller.gpudra.svc.cluster.local"}
	testLife  = Lifetimes{CA: 300 * 24 * time.Hour, Serving: 30 * 24 * time.Hour, CAPropagation: 10 * time.Minute}
	t0        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func mustPlan(t *testing.T, data map[string][]byte, now time.Time) (map[string][]byte, string) {
	t.Helper()
	next, reason, err := plan(data, testNames, now, testLife)
	if err != nil {
		t.Fatal(err)
	}
	return next, reason
}

func leafOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	c, k := parsePair(data[KeyCert], data[KeyKey])
	if c == nil || !matches(c, k) {
		t.Fatal("no usable serving certificate in the data")
	}
	return c
}

func caOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	c, _ := parsePair(data[KeyCA], data[KeyCAKey])
	if c == nil {
		t.Fatal("no CA in the data")
	}
	return c
}

func bundleOf(t *testing.T, data map[string][]byte) []*x509.Certificate {
	t.Helper()
	b, err := parseCerts(data[KeyCABundle])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifies reports whether a client trusting the bundle accepts the leaf
// for the service name at time now, as the API server would.
func verifies(t *testing.T, data map[string][]byte, now time.Time) error {
	t.Helper()
	pool := x509.NewCertPool()
	for _, c := range bundleOf(t, data) {
		pool.AddCert(c)
	}
	_, err := leafOf(t, data).Verify(x509.VerifyOptions{Roots: pool, DNSName: testNames[0], CurrentTime: now})
	return err
}

func TestPlanFreshInstall(t *testing.T) {
	data, reason := mustPlan(t, nil, t0)
	if !strings.Contains(reason, "no usable CA") || !strings.Contains(reason, "no usable serving certificate") {
		t.Errorf("reason = %q", reason)
	}
	if err := verifies(t, data, t0); err != nil {
		t.Fatalf("a client trusting the bundle rejects the serving certificate: %v", err)
	}
	leaf := leafOf(t, data)
	if got := leaf.DNSNames; len(got) != 2 || got[0] != testNames[0] {
		t.Errorf("DNS names = %v", got)
	}
	if leaf.NotAfter.Sub(t0) != testLife.Serving {
		t.Errorf("serving certificate valid until %v, want %v after now", leaf.NotAfter, testLife.Serving)
	}
	if len(bundleOf(t, data)) != 1 {
		t.Errorf("bundle has %d CAs, want 1", len(bundleOf(t, data)))
	}
	// Nothing to do a minute later.
	again, reason := mustPlan(t, data, t0.Add(time.Minute))
	if reason != "" {
		t.Errorf("second plan changed something: %q", reason)
	}
	for k := range data {
		if string(again[k]) != string(data[k]) {
			t.Errorf("second plan rewrote %s", k)
		}
	}
}

func TestPlanServingRenewal(t *testing.T) {
	data, _ := mustPlan(t, nil, t0)
	first := leafOf(t, data)
	// Two thirds of the lifetime (plus the backdate) in: not yet.
	if _, reason := mustPlan(t, data, t0.Add(testLife.Serving*2/3-2*time.Hour)); reason != "" {
		t.Fatalf("renewed too early: %q", reason)
	}
	now := t0.Add(testLife.Serving * 2 / 3)
	next, reason := mustPlan(t, data, now)
	if !strings.Contains(reason, "serving certificate expires") {
		t.Fatalf("reason = %q, want a renewal", reason)
	}
	if leafOf(t, next).SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("serving certificate not replaced")
	}
	if string(next[KeyCABundle]) != string(data[KeyCABundle]) || string(next[KeyCA]) != string(data[KeyCA]) {
		t.Error("a serving renewal changed the CA or the bundle (the API server would need a new caBundle)")
	}
	if err := verifies(t, next, now); err != nil {
		t.Fatal(err)
	}
}

// TestPlanOverTwoCALifetimes runs the planner once a day for two CA
// lifetimes and checks, at every step, that a client trusting the bundle
// of that step accepts what is served, and that one still holding the
// previous step's bundle does too: the API server sees a new caBundle only
// once it is injected. At each CA renewal it also checks that the new CA
// signs nothing until CAPropagation has passed.
func TestPlanOverTwoCALifetimes(t *testing.T) {
	data, _ := mustPlan(t, nil, t0)
	caRenewals, servingRenewals, switches := 0, 0, 0
	end := t0.Add(2 * testLife.CA)
	for now := t0.Add(24 * time.Hour); now.Before(end); now = now.Add(24 * time.Hour) {
		prev := data
		next, reason := mustPlan(t, data, now)
		data = next
		if err := verifies(t, data, now); err != nil {
			t.Fatalf("%v: a client trusting the new bundle rejects the serving certificate: %v (%s)", now, err, reason)
		}
		withOldBundle := map[string][]byte{KeyCert: data[KeyCert], KeyKey: data[KeyKey], KeyCABundle: prev[KeyCABundle]}
		if err := verifies(t, withOldBundle, now); err != nil {
			t.Fatalf("%v: an API server still holding the previous caBundle rejects the serving certificate: %v (%s)", now, err, reason)
		}
		if strings.Contains(reason, "serving certificate expires") {
			servingRenewals++
		}
		if ca := caOf(t, data); !signedBy(leafOf(t, prev), ca) && signedBy(leafOf(t, data), ca) {
			switches++ // the serving certificate moved to the renewed CA
		}
		if !strings.Contains(reason, "CA expires") {
			continue
		}
		caRenewals++
		if n := len(bundleOf(t, data)); n != 2 {
			t.Fatalf("%v: bundle has %d CAs after a CA renewal, want the new and the old", now, n)
		}
		newCA := caOf(t, data)
		if signedBy(leafOf(t, data), newCA) {
			t.Fatalf("%v: the new CA signed a serving certificate before the bundle could propagate", now)
		}
		if _, reason := mustPlan(t, data, now.Add(testLife.CAPropagation/2)); reason != "" {
			t.Fatalf("%v: changed during propagation: %q", now, reason)
		}
		after, reason := mustPlan(t, data, now.Add(testLife.CAPropagation))
		if reason == "" || !signedBy(leafOf(t, after), newCA) {
			t.Fatalf("%v: after propagation: %q", now, reason)
		}
	}
	// 600 days: CA renewed at day 200 and 400; serving certificates
	// every 20 days (two thirds of 30), some of them deferred or replaced
	// by the switch to a renewed CA.
	if caRenewals != 2 || switches != 2 || servingRenewals < 25 {
		t.Errorf("CA renewals %d (want 2), switches %d (want 2), serving renewals %d (want about 28)", caRenewals, switches, servingRenewals)
	}
	if n := len(bundleOf(t, data)); n != 1 {
		t.Errorf("bundle at the end has %d CAs, want 1 (the CA of day 200 expired on day 500)", n)
	}
}

func TestPlanRepairs(t *testing.T) {
	good, _ := mustPlan(t, nil, t0)
	other, _ := mustPlan(t, nil, t0)
	for name, tc := range map[string]struct {
		mutate func(map[string][]byte)
		want   string
	}{
		"corrupt serving certificate": {func(d map[string][]byte) { d[KeyCert] = []byte("garbage") }, "no usable serving certificate"},
		"key of another certificate":  {func(d map[string][]byte) { d[KeyKey] = other[KeyKey] }, "no usable serving certificate"},
		"corrupt CA key":              {func(d map[string][]byte) { d[KeyCAKey] = []byte("-----") }, "no usable CA"},
		"serving certificate of another CA": {func(d map[string][]byte) {
			d[KeyCert], d[KeyKey] = other[KeyCert], other[KeyKey]
		}, "no longer trusted"},
	} {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range good {
				data[k] = v
			}
			tc.mutate(data)
			next, reason := mustPlan(t, data, t0.Add(time.Hour))
			if !strings.Contains(reason, tc.want) {
				t.Errorf("reason = %q, want %q", reason, tc.want)
			}
			if err := verifies(t, next, t0.Add(time.Hour)); err != nil {
				t.Errorf("not repaired: %v", err)
			}
		})
	}
	t.Run("new service name", func(t *testing.T) {
		next, reason, err := plan(good, []string{"renamed.gpudra.svc"}, t0.Add(time.Hour), testLife)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(reason, "serving certificate is for") {
			t.Errorf("reason = %q", reason)
		}
		if got := leafOf(t, next).DNSNames; len(got) != 1 || got[0] != "renamed.gpudra.svc" {
			t.Errorf("DNS names = %v", got)
		}
	})
}
