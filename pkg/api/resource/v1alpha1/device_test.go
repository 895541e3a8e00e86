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

package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestForDevice(t *testing.T) {
	gpu := func(caps string) []byte {
		return []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":` + caps + `}`)
	}
	mig := []byte(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig","driverCapabilities":["video"]}`)
	for _, tt := range []struct {
		name     string
		layers   [][]byte
		mig      bool
		wantKind string
		wantCaps []string
		wantErr  string
	}{
		{"no config, whole GPU", nil, false, GpuConfigKind, DefaultDriverCapabilities, ""},
		{"no config, MIG", nil, true, MigConfigKind, DefaultDriverCapabilities, ""},
		{"the later one wins", [][]byte{gpu(`["compute"]`), gpu(`["graphics"]`)}, false, GpuConfigKind, []string{"graphics"}, ""},
		{"MigConfig on a MIG partition", [][]byte{mig}, true, MigConfigKind, []string{"video"}, ""},
		{"GpuConfig on a MIG partition", [][]byte{gpu(`["compute"]`)}, true, "", nil, "use kind MigConfig"},
		{"MigConfig on a whole GPU", [][]byte{gpu(`["compute"]`), mig}, false, "", nil, "use kind GpuConfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ForDevice(tt.layers, tt.mig)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kind := got.GetObjectKind().GroupVersionKind().Kind; kind != tt.wantKind || !slices.Equal(capsOf(got), tt.wantCaps) {
				t.Errorf("got %s %v, want %s %v", kind, capsOf(got), tt.wantKind, tt.wantCaps)
			}
		})
	}
}

func capsOf(c Config) []string {
	switch c := c.(type) {
	case *GpuConfig:
		return c.DriverCapabilities
	case *MigConfig:
		return c.DriverCapabilities
	}
	return nil
}
