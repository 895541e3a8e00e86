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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Store reads and writes the checkpoint file at one path.
//
// Its methods are safe for concurrent use, but a Store does not merge
// updates: callers that modify the checkpoint from several goroutines must
// serialize their load-modify-save themselves.
type Store struct {
	path string

	mu sync.Mutex
	// refused is why the last Load did not trust the file. While it is
	// set, Save refuses to write: replacing a record we could not read
	// would silently forget prepared claims.
	refused error
	// beforeRename, when set, runs after the temporary file is written and
	// before it replaces the checkpoint; tests use it to simulate a crash.
	beforeRename func() error
}

// NewStore returns a Store for the checkpoint file at path. Nothing is read
// or written until Load or Save.
func NewStore(path string) *Store {
	return &Store{path: path}
}

// Path is the checkpoint file's path.
func (s *Store) Path() string { return s.path }

// Load reads the checkpoint. A missing file is a fresh node: Load returns an
// empty checkpoint of the current version with no boot ID. A file that does
// not parse or fails its checksum gives an error wrapping ErrCorrupt; an
// intact file of another version gives one wrapping ErrUnsupportedVersion.
// In both cases the file is left as it is and Save refuses to replace it
// until a later Load succeeds.
func (s *Store) Load() (*Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	cp, err := s.load()
	s.refused = err
	return cp, err
}

func (s *Store) load() (*Checkpoint, error) {
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return New(""), nil
	case err != nil:
		return nil, fmt.Errorf("read checkpoint: %w", err)
	case len(data) == 0:
		err = corruptf("the file is empty (a write that never reached the disk?)")
	default:
		var cp *Checkpoint
		if cp, err = decode(data); err == nil {
			return cp, nil
		}
	}
	return nil, fmt.Errorf("checkpoint %s: %w; %s", s.path, err, leftUntouched)
}

// Exists reports whether the checkpoint file is there. Load reads a missing
// file as an empty checkpoint, which is right for a fresh node and wrong for
// a node whose file was deleted: the caller tells the two apart by what
// else the node holds (CDI specs of prepared claims).
func (s *Store) Exists() (bool, error) {
	_, err := os.Stat(s.path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("look for checkpoint %s: %w", s.path, err)
	}
}

// Save replaces the checkpoint file with cp, written as the current Version.
// It is atomic: after a crash at any point the file holds either the old
// checkpoint or the new one, never a mix. The directory is created if
// missing.
func (s *Store) Save(cp *Checkpoint) error {
	if cp == nil {
		return errors.New("save checkpoint: nil checkpoint")
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.refused != nil {
		return fmt.Errorf("refusing to overwrite a checkpoint that could not be read: %w", s.refused)
	}
	data, err := encode(cp)
	if err != nil {
		return err
	}
	if err := s.writeAtomic(data); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	return nil
}

// writeAtomic writes data to a temporary file next to the checkpoint, makes
// it durable, renames it over the checkpoint and makes the rename durable.
// The temporary file has a fixed name: saves are serialized by s.mu, and a
// leftover from a crash is simply overwritten by the next save.
func (s *Store) writeAtomic(data []byte) (err error) {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	tmp := s.path + ".tmp"
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := writeFileSync(tmp, data); err != nil {
		return err
	}
	if s.beforeRename != nil {
		if err := s.beforeRename(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("replace checkpoint: %w", err)
	}
	// Without this the rename itself may be lost in a power cut, leaving
	// the old checkpoint in place after the plugin reported success.
	return syncDir(dir)
}

// writeFileSync writes data to path and flushes it to disk, so that the
// rename that follows never publishes a file whose content is still only in
// the page cache.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write temporary file: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temporary file: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory to sync: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
