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

package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBootID(t *testing.T) {
	tests := []struct {
		name    string
		content *string // nil: no file
		want    string
		wantErr bool
	}{
		{name: "as the kernel writes it", content: ptr("6f0b6a8e-5a2c-4d39-9d6c-1f2e3a4b5c6d\n"), want: "6f0b6a8e-5a2c-4d39-9d6c-1f2e3a4b5c6d"},
		{name: "empty", content: ptr("\n"), wantErr: true},
		{name: "missing", content: nil, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "boot_id")
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			got, err := BootID(path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("BootID = %q, %v; want error %v", got, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("BootID = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBootIDOfThisMachine reads the real file, as the plugin does.
func TestBootIDOfThisMachine(t *testing.T) {
	if _, err := os.Stat(BootIDPath); err != nil {
		t.Skipf("no %s here: %v", BootIDPath, err)
	}
	// The plugin passes no path on a real node: that must mean the kernel's.
	for _, path := range []string{BootIDPath, ""} {
		id, err := BootID(path)
		if err != nil || len(id) != 36 {
			t.Errorf("BootID(%q) = %q, %v; want a 36-character UUID", path, id, err)
		}
	}
}

func ptr(s string) *string { return &s }
