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

package slicebuilder

import (
	"testing"

	"github.com/blang/semver/v4"
)

func TestNormalizeVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "550.54.15", want: "550.54.15"},
		{in: "560.28.03", want: "560.28.3"},
		{in: "535.104", want: "535.104.0"},
		{in: "535.104.05", want: "535.104.5"},
		{in: "12.4", want: "12.4.0"},
		{in: "9.0", want: "9.0.0"},
		{in: "8.9", want: "8.9.0"},
		{in: "470", want: "470.0.0"},
		{in: "007.00.00", want: "7.0.0"},
		{in: "", wantErr: true},
		{in: "550.54.15.1", wantErr: true},
		{in: "550..15", wantErr: true},
		{in: "550.54.", wantErr: true},
		{in: "v550.54.15", wantErr: true},
		{in: "550.54.15-rc1", wantErr: true},
		{in: "+1.0", wantErr: true},
		{in: "-1.0", wantErr: true},
		{in: "99999999999999999999.0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeVersion(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NormalizeVersion(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizeVersion(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("NormalizeVersion(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// Whatever it returns must be what the API server accepts.
			if _, err := semver.Parse(got); err != nil {
				t.Errorf("NormalizeVersion(%q) = %q, not strict semver: %v", tt.in, got, err)
			}
		})
	}
}
