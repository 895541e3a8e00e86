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

package nodestate

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// TestRecordMigPublished: the GPUs recorded as having published their MIG
// placements are on disk once RecordMigPublished returns and survive a
// restart (with a reboot too); a write that fails leaves the record as it
// was, in memory and on disk.
func TestRecordMigPublished(t *testing.T) {
	n := newNode(t, 4)
	s, _ := n.restart()
	recorded := func(s *State) []string { return slices.Sorted(maps.Keys(s.MigPublished())) }
	if got := recorded(s); len(got) != 0 {
		t.Fatalf("a fresh node records %v", got)
	}
	if err := s.RecordMigPublished([]string{gpuUUID(3), gpuUUID(2)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMigPublished([]string{gpuUUID(1)}, []string{gpuUUID(2)}); err != nil {
		t.Fatal(err)
	}
	want := []string{gpuUUID(1), gpuUUID(3)}
	if got := recorded(s); !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}

	n.bootID = "rebooted"
	s, _ = n.restart()
	if got := recorded(s); !slices.Equal(got, want) {
		t.Fatalf("after a restart and reboot: recorded %v, want %v", got, want)
	}

	n.hooks.BeforeCheckpointWrite = func() error { return errors.New("disk full") }
	s = n.start()
	if err := s.RecordMigPublished([]string{gpuUUID(0)}, []string{gpuUUID(3)}); err == nil {
		t.Fatal("RecordMigPublished succeeded with a failing write")
	}
	if got := recorded(s); !slices.Equal(got, want) {
		t.Errorf("after a failed write: recorded %v in memory, want %v", got, want)
	}
	n.hooks.BeforeCheckpointWrite = nil
	if got := recorded(n.start()); !slices.Equal(got, want) {
		t.Errorf("after a failed write: recorded %v on disk, want %v", got, want)
	}
}
