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

package nvmlfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Files in the state directory.
const (
	stateFileName  = "nvmlfake-state.json"
	lockFileName   = "nvmlfake-state.lock"
	eventsFileName = "nvmlfake-xid-events.jsonl"
)

// bootIDFile says which boot this is; a variable so tests can reboot.
var bootIDFile = "/proc/sys/kernel/random/boot_id"

// errAbort stops a mutation without an error worth logging: the NVML call
// failed and nothing is to be written.
var errAbort = errors.New("mutation aborted")

// store keeps the state, in memory or in a file that several processes
// (the plugin, a CLI, a test) share the way they share real GPUs: every
// mutation is a read-modify-write under an exclusive file lock, written
// atomically, and readers pick up changes made by other processes.
type store struct {
	// dir is the state directory; empty keeps the state in memory only.
	dir string
	log klog.Logger

	mu  sync.Mutex
	cur *state
	// stamp identifies the file cur was read from (an atomic rename makes
	// a new file), so a change by another process is noticed.
	stamp os.FileInfo
}

func newStore(dir string, logger klog.Logger) (*store, error) {
	st := &store{dir: dir, log: logger, cur: &state{Version: stateVersion, GPUs: map[string]*gpuState{}}}
	if dir == "" {
		return st, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	return st, nil
}

func (st *store) path() string { return filepath.Join(st.dir, stateFileName) }

// view calls fn with the current state. fn must neither keep nor modify it.
func (st *store) view(fn func(*state)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.refresh(); err != nil {
		return err
	}
	fn(st.cur)
	return nil
}

// update applies fn to a copy of the state and persists the copy when fn
// returns SUCCESS. A state that cannot be read or written is
// ERROR_UNKNOWN, the closest NVML has to "the GPU did not answer".
func (st *store) update(fn func(*state) nvml.Return) nvml.Return {
	ret := nvml.SUCCESS
	err := st.mutate(func(s *state) error {
		if ret = fn(s); ret != nvml.SUCCESS {
			return errAbort
		}
		return nil
	})
	if err != nil && !errors.Is(err, errAbort) {
		logStoreError(st.log, err)
		return nvml.ERROR_UNKNOWN
	}
	return ret
}

// mutate applies fn to a copy of the state under the cross-process lock
// and persists the copy when fn returns nil.
func (st *store) mutate(fn func(*state) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	// Under the lock, re-read unconditionally: another process may have
	// written within the modification time's granularity.
	st.stamp = nil
	if err := st.refresh(); err != nil {
		return err
	}
	next := st.cur.clone()
	if err := fn(next); err != nil {
		return err
	}
	if err := st.write(next); err != nil {
		return err
	}
	st.cur = next
	return nil
}

// refresh re-reads the state file if it changed since it was last read.
func (st *store) refresh() error {
	if st.dir == "" {
		return nil
	}
	fi, err := os.Stat(st.path())
	if errors.Is(err, fs.ErrNotExist) {
		st.cur = &state{Version: stateVersion, GPUs: map[string]*gpuState{}}
		st.stamp = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat state file: %w", err)
	}
	if st.stamp != nil && os.SameFile(st.stamp, fi) && st.stamp.ModTime().Equal(fi.ModTime()) && st.stamp.Size() == fi.Size() {
		return nil
	}
	data, err := os.ReadFile(st.path())
	if err != nil {
		return fmt.Errorf("read state file: %w", err)
	}
	s := &state{}
	if err := json.Unmarshal(data, s); err != nil {
		return fmt.Errorf("state file %s is corrupt: %w", st.path(), err)
	}
	if s.Version != stateVersion {
		return fmt.Errorf("state file %s has version %d, want %d", st.path(), s.Version, stateVersion)
	}
	if s.GPUs == nil {
		s.GPUs = map[string]*gpuState{}
	}
	st.cur, st.stamp = s, fi
	return nil
}

// write replaces the state file atomically: a reader, or a process that
// crashed at any moment and restarted, sees either the old state or the new
// one (writeFileAtomic says why that is enough).
func (st *store) write(s *state) error {
	if st.dir == "" {
		return nil
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := writeFileAtomic(st.path(), data); err != nil {
		return err
	}
	fi, err := os.Stat(st.path())
	if err != nil {
		return fmt.Errorf("stat state file: %w", err)
	}
	st.stamp = fi
	return nil
}

// lock takes the state directory's exclusive lock, shared with other
// processes; a no-op for an in-memory store.
func (st *store) lock() (unlock func(), err error) {
	if st.dir == "" {
		return func() {}, nil
	}
	return lockDir(st.dir)
}

// lockDir takes the exclusive lock of a state directory.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock state: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it over path: another process, or this one after a crash at any moment,
// reads either the old state or the new one, never a mix.
//
// It does not fsync. The state stands in for what the GPUs themselves
// remember, which lives outside the node's disk: it must survive a process
// crash (the page cache does), not a power cut. A power cut destroys every
// MIG instance on real GPUs anyway, and in the fake it is simulated with a
// new boot ID (Reboot), not by cutting power to the disk. Two fsyncs per
// NVML call would make every MIG prepare measure the fake, not the driver.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temporary state file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write temporary state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temporary state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace state file: %w", err)
	}
	return nil
}

// currentBootID identifies this boot; empty when the kernel does not say,
// which turns reboot detection off.
func currentBootID() string {
	data, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
