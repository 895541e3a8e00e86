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

package cdispec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestRemoveClaimSpecIsIdempotent(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, w *Writer)
	}{
		{name: "written spec", setup: func(t *testing.T, w *Writer) {
			if err := w.WriteClaimSpec(uidA, commonEdits(t), []Device{gpuDevice("0")}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "never written", setup: func(*testing.T, *Writer) {}},
		{name: "JSON spec of another gpudra version", setup: func(t *testing.T, w *Writer) {
			path := filepath.Join(w.Dir(), "k8s.gpu.gpudra.io-claim_"+uidA+".json")
			if err := os.WriteFile(path, []byte(`{}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t)
			tc.setup(t, w)
			for i := range 2 {
				if err := w.RemoveClaimSpec(uidA); err != nil {
					t.Fatalf("RemoveClaimSpec #%d: %v", i+1, err)
				}
			}
			if ok, err := w.ClaimSpecExists(uidA); err != nil || ok {
				t.Errorf("ClaimSpecExists after remove = %v, %v", ok, err)
			}
			if entries, _ := os.ReadDir(w.Dir()); len(entries) != 0 {
				t.Errorf("%d files left after remove", len(entries))
			}
		})
	}
}

func TestTwoClaimsDoNotInterfere(t *testing.T) {
	w := newWriter(t)
	// The same device name in both: a time-sliced GPU shared by two claims.
	a := Device{Name: "gpu-0", Edits: gpu.Edits{Env: []string{"CLAIM=a"}}}
	b := Device{Name: "gpu-0", Edits: gpu.Edits{Env: []string{"CLAIM=b"}}}
	if err := w.WriteClaimSpec(uidA, gpu.Edits{Env: []string{"COMMON=a"}}, []Device{a}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteClaimSpec(uidB, gpu.Edits{Env: []string{"COMMON=b"}}, []Device{b}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		uid      string
		want     []string
		wantNone []string
	}{
		{uid: uidA, want: []string{"CLAIM=a", "COMMON=a"}, wantNone: []string{"CLAIM=b", "COMMON=b"}},
		{uid: uidB, want: []string{"CLAIM=b", "COMMON=b"}, wantNone: []string{"CLAIM=a", "COMMON=a"}},
	} {
		env := inject(t, w.Dir(), w.DeviceID(tc.uid, "gpu-0")).Process.Env
		for _, e := range tc.want {
			if !slices.Contains(env, e) {
				t.Errorf("claim %s: env %q missing from %v", tc.uid, e, env)
			}
		}
		for _, e := range tc.wantNone {
			if slices.Contains(env, e) {
				t.Errorf("claim %s: got the other claim's %q", tc.uid, e)
			}
		}
	}

	if err := w.RemoveClaimSpec(uidA); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.ClaimSpecExists(uidB); err != nil || !ok {
		t.Fatalf("removing claim A removed claim B's spec: %v, %v", ok, err)
	}
	if env := inject(t, w.Dir(), w.DeviceID(uidB, "gpu-0")).Process.Env; !slices.Contains(env, "CLAIM=b") {
		t.Errorf("claim B after removing A: env %v", env)
	}
	if uids, err := w.ListClaimUIDs(); err != nil || !slices.Equal(uids, []string{uidB}) {
		t.Errorf("ListClaimUIDs = %v, %v; want only %s", uids, err, uidB)
	}
}

func TestListClaimUIDs(t *testing.T) {
	w := newWriter(t)
	for _, uid := range []string{uidA, uidB} {
		if err := w.WriteClaimSpec(uid, gpu.Edits{}, []Device{gpuDevice("0")}); err != nil {
			t.Fatal(err)
		}
	}
	// What else lives in /var/run/cdi: other vendors, another gpudra
	// instance with its own driver name, the library's temporary files,
	// a spec of ours that no longer parses.
	other, err := New(w.Dir(), "gpu.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.WriteClaimSpec("ffff", gpu.Edits{}, []Device{gpuDevice("0")}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"nvidia.com-gpu.yaml",
		"k8s.gpu.gpudra.io-claim_.yaml",
		"spec.12345.tmp",
		"k8s.gpu.gpudra.io-claim_" + uidA + ".yaml.bak",
		"k8s.gpu.gpudra.io-claim_broken.json",
	} {
		if err := os.WriteFile(filepath.Join(w.Dir(), name), []byte("not a spec"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(w.Dir(), "k8s.gpu.gpudra.io-claim_dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := w.ListClaimUIDs()
	if err != nil {
		t.Fatalf("ListClaimUIDs: %v", err)
	}
	want := []string{uidB, uidA, "broken"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ListClaimUIDs = %v, want %v", got, want)
	}
	if got, err := other.ListClaimUIDs(); err != nil || !slices.Equal(got, []string{"ffff"}) {
		t.Errorf("other driver's ListClaimUIDs = %v, %v", got, err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name       string
		driverName string
		wantID     string
		wantErr    string
	}{
		{name: "default driver name", driverName: "", wantID: "k8s.gpu.gpudra.io/claim=" + uidA + "-gpu-0"},
		{name: "configured driver name", driverName: "gpu.example.com", wantID: "k8s.gpu.example.com/claim=" + uidA + "-gpu-0"},
		{name: "driver name CDI cannot use", driverName: "gpu/example", wantErr: `driver name "gpu/example" cannot be used as a CDI vendor`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "does", "not", "exist")
			w, err := New(dir, tc.driverName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if info, err := os.Stat(dir); err != nil || !info.IsDir() {
				t.Errorf("spec directory not created: %v", err)
			}
			if got := w.DeviceID(uidA, "gpu-0"); got != tc.wantID {
				t.Errorf("DeviceID = %q, want %q", got, tc.wantID)
			}
		})
	}
}
