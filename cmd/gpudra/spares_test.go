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
	"testing"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestParseOfflineSpares: offline, a fleet-mode node is a node the
// controller keeps one spare on; the other spellings are the plugin's.
func TestParseOfflineSpares(t *testing.T) {
	for in, want := range map[string]slicebuilder.SpareGPUs{
		"fleet": slicebuilder.FleetAssigned(1),
		"1":     {N: 1},
		"3":     {N: 3},
		"all":   {All: true},
	} {
		got, err := parseOfflineSpares(in)
		if err != nil || got != want {
			t.Errorf("parseOfflineSpares(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := parseOfflineSpares("0"); err == nil {
		t.Error("parseOfflineSpares(\"0\") accepted")
	}
}
