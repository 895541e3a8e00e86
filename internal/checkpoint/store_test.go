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
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleCheckpoint() *Checkpoint {
	return &Checkpoint{
		Version: Version,
		BootID:  "0b5c3cbe-6b4a-4e0b-9a31-2b2f3c0c7f11",
		Claims: map[string]Claim{
			"uid-1": {
				UID: "uid-1", Namespace: "team-a", Name: "train-0-gpu", State: PrepareCompleted,
				Devices: []Device{{
					Requests:     []string{"gpu"},
					Pool:         "node-1",
					Device:       "gpu-0",
					GPUUUID:      "GPU-8f1c0c7e-0000-0000-0000-000000000000",
					CDIDeviceIDs: []string{"k8s.gpu.gpudra.io/claim=uid-1-gpu-0"},
					Config:       json.RawMessage(`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","utility"]}`),
				}},
			},
			// Characters that JSON encoders escape differently exercise
			// the checksum's canonical form.
			"uid-2": {UID: "uid-2", Namespace: "team-b", Name: "odd <&> \u2028 name", State: PrepareStarted},
		},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		save *Checkpoint
		want *Checkpoint
	}{
		{name: "claims in both states", save: sampleCheckpoint(), want: sampleCheckpoint()},
		{name: "nil claims read back as an empty map", save: &Checkpoint{BootID: "b"}, want: New("b")},
		{
			name: "Save writes the current version whatever the struct says",
			save: &Checkpoint{Version: "v0", BootID: "b", Claims: map[string]Claim{}},
			want: New("b"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			if err := NewStore(path).Save(tc.save); err != nil {
				t.Fatalf("Save: %v", err)
			}
			// A new Store, as after a plugin restart.
			got, err := NewStore(path).Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Load = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestLoadMissingFileIsEmpty(t *testing.T) {
	got, err := NewStore(filepath.Join(t.TempDir(), "nothing-here.json")).Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(got, New("")) {
		t.Errorf("Load = %#v, want an empty checkpoint", got)
	}
}

func TestSaveCreatesDirectoryAndPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "checkpoint.json")
	if err := NewStore(path).Save(sampleCheckpoint()); err != nil {
		t.Fatalf("Save: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("checkpoint mode = %v, want 0600", perm)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind after a successful save: %v", err)
	}
}

func TestSaveReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	s := NewStore(path)
	if err := s.Save(sampleCheckpoint()); err != nil {
		t.Fatal(err)
	}
	next := sampleCheckpoint()
	delete(next.Claims, "uid-1")
	if err := s.Save(next); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Claims["uid-1"]; ok || len(got.Claims) != 1 {
		t.Errorf("claims after second save = %v, want only uid-2", got.Claims)
	}
}

// TestCrashBeforeRename simulates the plugin dying after it wrote the
// temporary file and before the rename: the old checkpoint must still be
// the one that is read, and the next save must succeed.
func TestCrashBeforeRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	old := sampleCheckpoint()
	if err := NewStore(path).Save(old); err != nil {
		t.Fatal(err)
	}

	crashing := NewStore(path)
	crashing.beforeRename = func() error { return errors.New("simulated crash") }
	next := sampleCheckpoint()
	next.Claims = map[string]Claim{}
	if err := crashing.Save(next); err == nil {
		t.Fatal("Save with a crash before rename succeeded")
	}

	// A real crash leaves the temporary file, half written at worst.
	if err := os.WriteFile(path+".tmp", []byte(`{"checksum":"sha256:00`), 0o600); err != nil {
		t.Fatal(err)
	}

	restarted := NewStore(path)
	got, err := restarted.Load()
	if err != nil {
		t.Fatalf("Load after crash: %v", err)
	}
	if !reflect.DeepEqual(got, old) {
		t.Fatalf("Load after crash = %#v, want the old checkpoint", got)
	}
	if err := restarted.Save(next); err != nil {
		t.Fatalf("Save after crash: %v", err)
	}
	if got, err := restarted.Load(); err != nil || len(got.Claims) != 0 {
		t.Fatalf("Load after recovery = %v, %v; want the new, empty checkpoint", got, err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary file still there after a successful save: %v", err)
	}
}

// TestLoadRefusesUntrustworthyFiles checks that a damaged file is reported
// with its path and never replaced behind the admin's back.
func TestLoadRefusesUntrustworthyFiles(t *testing.T) {
	good := encodeSample(t)
	tests := []struct {
		name    string
		content []byte
		wantIs  error
		wantMsg string
	}{
		{
			name:    "truncated",
			content: good[:len(good)/2],
			wantIs:  ErrCorrupt,
			wantMsg: "does not parse as a checkpoint file",
		},
		{
			name:    "empty",
			content: []byte{},
			wantIs:  ErrCorrupt,
			wantMsg: "the file is empty",
		},
		{
			name:    "bit flipped in a claim",
			content: flipBit(good, bytes.Index(good, []byte("train-0-gpu")), 0),
			wantIs:  ErrCorrupt,
			wantMsg: "checksum mismatch",
		},
		{
			name:    "bit flipped in the checksum",
			content: flipBit(good, bytes.Index(good, []byte("sha256:"))+10, 1),
			wantIs:  ErrCorrupt,
			wantMsg: "checksum mismatch",
		},
		{
			name:    "edited by hand",
			content: bytes.Replace(good, []byte(`"PrepareStarted"`), []byte(`"PrepareCompleted"`), 1),
			wantIs:  ErrCorrupt,
			wantMsg: "checksum mismatch",
		},
		{
			name:    "no checksum",
			content: []byte(`{"checkpoint":{"version":"v1","bootID":"b","claims":{}}}`),
			wantIs:  ErrCorrupt,
			wantMsg: `"checksum" or "checkpoint" is missing`,
		},
		{
			name:    "unknown field next to the checksum",
			content: bytes.Replace(good, []byte(`"checksum"`), []byte(`"note":"x","checksum"`), 1),
			wantIs:  ErrCorrupt,
			wantMsg: `unknown field "note"`,
		},
		{
			name:    "a second body appended",
			content: bytes.Replace(good, []byte(`"checksum"`), []byte(`"checkpoint":{},"checksum"`), 1),
			wantIs:  ErrCorrupt,
			wantMsg: `duplicate field "checkpoint"`,
		},
		{
			name:    "valid checksum over a body of the wrong shape",
			content: envelope(t, `{"version":"v1","claims":[]}`),
			wantIs:  ErrCorrupt,
			wantMsg: "checkpoint body does not parse",
		},
		{
			name:    "newer version",
			content: envelope(t, `{"version":"v2","bootID":"b","claims":{}}`),
			wantIs:  ErrUnsupportedVersion,
			wantMsg: `the file has version "v2" but this gpudra reads only "v1"`,
		},
		{
			name:    "no version",
			content: envelope(t, `{"bootID":"b","claims":{}}`),
			wantIs:  ErrUnsupportedVersion,
			wantMsg: `the file has version ""`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewStore(path)
			cp, err := s.Load()
			if err == nil {
				t.Fatalf("Load = %#v, want an error", cp)
			}
			if !errors.Is(err, tc.wantIs) {
				t.Errorf("Load error does not wrap %v: %v", tc.wantIs, err)
			}
			for _, want := range []string{path, tc.wantMsg, "left untouched"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Load error does not say %q: %v", want, err)
				}
			}

			// The plugin must not be able to paper over it either.
			if err := s.Save(New("b")); err == nil {
				t.Error("Save over a file that Load refused succeeded")
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, tc.content) {
				t.Errorf("file changed after Load and Save: err=%v\n got %q\nwant %q", err, got, tc.content)
			}

			// Once the admin moves the file aside, the node starts afresh.
			if err := os.Rename(path, path+".broken"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(); err != nil {
				t.Fatalf("Load after the file was moved aside: %v", err)
			}
			if err := s.Save(New("b")); err != nil {
				t.Errorf("Save after the file was moved aside: %v", err)
			}
		})
	}
}

// TestEveryBitFlipIsDetected flips each bit of a valid file in turn: not one
// of them may be read as a valid checkpoint.
func TestEveryBitFlipIsDetected(t *testing.T) {
	good := encodeSample(t)
	for i := range good {
		for bit := range 8 {
			if cp, err := decode(flipBit(good, i, bit)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flipping bit %d of byte %d (%q) gave %#v, %v; want ErrCorrupt", bit, i, good[i], cp, err)
			}
		}
	}
}

// TestUnknownFieldsAreTolerated reads a checkpoint as a later gpudra might
// write it, with fields this one does not know at every level.
func TestUnknownFieldsAreTolerated(t *testing.T) {
	body := `{
		"version": "v1", "bootID": "b", "writtenBy": "gpudra v9",
		"claims": {"uid-1": {
			"uid": "uid-1", "namespace": "ns", "name": "c", "state": "PrepareCompleted",
			"preparedAt": "2030-01-01T00:00:00Z",
			"devices": [{
				"requests": ["mig"], "pool": "node-1", "device": "gpu-0-mig-1g10gb-3",
				"gpuUUID": "GPU-1", "cdiDeviceIDs": ["k8s.gpu.gpudra.io/claim=uid-1-gpu-0-mig-1g10gb-3"],
				"migInstance": {"gpuInstanceID": 3, "computeInstanceID": 0},
				"vgpu": {"profile": "A100-4C", "instance": 3}
			}]
		}}
	}`
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(path, envelope(t, body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(path).Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Checkpoint{Version: "v1", BootID: "b", Claims: map[string]Claim{"uid-1": {
		UID: "uid-1", Namespace: "ns", Name: "c", State: PrepareCompleted,
		Devices: []Device{{
			Requests: []string{"mig"}, Pool: "node-1", Device: "gpu-0-mig-1g10gb-3", GPUUUID: "GPU-1",
			CDIDeviceIDs: []string{"k8s.gpu.gpudra.io/claim=uid-1-gpu-0-mig-1g10gb-3"},
		}},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %#v\nwant %#v", got, want)
	}
}

func TestSaveNil(t *testing.T) {
	if err := NewStore(filepath.Join(t.TempDir(), "c.json")).Save(nil); err == nil {
		t.Error("Save(nil) succeeded")
	}
}

func encodeSample(t *testing.T) []byte {
	t.Helper()
	data, err := encode(sampleCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// envelope wraps a hand-written body with its correct checksum, the way a
// gpudra of another version would have written it.
func envelope(t *testing.T, body string) []byte {
	t.Helper()
	compacted, err := compact([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(fileFormat{Checksum: checksum(compacted), Checkpoint: json.RawMessage(body)}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func flipBit(data []byte, i, bit int) []byte {
	if i < 0 {
		panic("flipBit: marker not found")
	}
	out := bytes.Clone(data)
	out[i] ^= 1 << bit
	return out
}

// TestMigFieldsRoundTrip: the MIG steps and IDs and the GPUs whose MIG mode
// gpudra switched on survive a save and load; a record without them (an
// older gpudra's) still reads as "nothing MIG was done".
func TestMigFieldsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	gi, ci := 3, 0
	cp := New("boot")
	cp.MigModeEnabled = []string{"GPU-a"}
	cp.Claims["uid"] = Claim{UID: "uid", State: PrepareStarted, Devices: []Device{{
		Requests: []string{"mig"}, Pool: "node", Device: "gpu-0-mig-1g10gb-3", GPUUUID: "GPU-a",
		Mig: &MigDevice{Profile: "1g.10gb", ProfileID: 19, PlacementStart: 3, PlacementSize: 1,
			Step: MigCreated, GPUInstanceID: &gi, ComputeInstanceID: &ci, UUID: "MIG-x"},
	}, {Requests: []string{"gpu"}, Pool: "node", Device: "gpu-1", GPUUUID: "GPU-b"}}}
	if err := NewStore(path).Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(path).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Claims, cp.Claims) || !reflect.DeepEqual(got.MigModeEnabled, cp.MigModeEnabled) {
		t.Errorf("round trip: got %+v, want %+v", got, cp)
	}
	if got.Claims["uid"].Devices[1].Mig != nil {
		t.Error("a whole GPU's record grew MIG fields")
	}
}

// TestMigPublishedRoundTrip: the GPUs whose MIG placements were published
// survive a save and load; a checkpoint written before they were recorded
// (no "migPublished") still loads, with none recorded.
func TestMigPublishedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	cp := New("boot")
	cp.MigPublished = []string{"GPU-a", "GPU-b"}
	if err := NewStore(path).Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(path).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.MigPublished, cp.MigPublished) {
		t.Errorf("round trip: MigPublished %v, want %v", got.MigPublished, cp.MigPublished)
	}

	old := `{"version": "v1", "bootID": "b", "claims": {}, "migModeEnabled": ["GPU-a"]}`
	if err := os.WriteFile(path, envelope(t, old), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = NewStore(path).Load()
	if err != nil {
		t.Fatalf("a checkpoint without migPublished: %v", err)
	}
	if got.MigPublished != nil || !reflect.DeepEqual(got.MigModeEnabled, []string{"GPU-a"}) {
		t.Errorf("a checkpoint without migPublished read as %+v", got)
	}
}
