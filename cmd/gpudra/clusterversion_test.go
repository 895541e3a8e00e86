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

package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakeclient "k8s.io/client-go/testing"
)

// TestServerKubernetesVersion: check --cluster reads the cluster's
// version from its API server rather than assuming the newest.
func TestServerKubernetesVersion(t *testing.T) {
	for _, tt := range []struct {
		name           string
		major, minor   string
		given          string
		explicit       bool
		want, wantNote string
	}{
		{name: "a version check knows", major: "1", minor: "35", given: "1.37", want: "1.35", wantNote: "Kubernetes 1.35 (the API server's version)"},
		{name: "a provider's minor", major: "1", minor: "34+", given: "1.37", want: "1.34"},
		{name: "newer than check knows", major: "1", minor: "40", given: "1.37", want: "1.37", wantNote: "newer than check knows"},
		{name: "older than check knows", major: "1", minor: "30", given: "1.37", want: "1.34", wantNote: "older than check knows"},
		{name: "the flag wins", major: "1", minor: "35", given: "1.36", explicit: true, want: "1.36", wantNote: "the API server runs Kubernetes 1.35; checked as 1.36"},
		{name: "unreadable", major: "2", minor: "x", given: "1.37", want: "1.37", wantNote: "cannot read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &fakeclient.Fake{}, FakedServerVersion: &version.Info{Major: tt.major, Minor: tt.minor}}
			got, note, err := serverKubernetesVersion(d, tt.given, tt.explicit)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !strings.Contains(note, tt.wantNote) {
				t.Errorf("got %s (%q), want %s (%q)", got, note, tt.want, tt.wantNote)
			}
		})
	}
}
