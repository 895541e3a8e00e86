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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"
)

// The CDI library writes a spec to a temporary file (spec.*.tmp) next to
// it and renames that into place. When the write itself fails (a full
// disk), it returns without removing the temporary file, which then stays
// in the runtime's spec directory for good: nothing can tell whose it is,
// as every CDI writer on the node uses the same pattern.
//
// So each write gets a staging directory of its own inside the spec
// directory (hidden; the runtime's CDI scan skips directories): the
// library writes the spec there, validated, and the finished file is
// renamed into place, which is atomic because both are on one file system.
// Whatever happens, the staging directory is removed afterwards. The
// writer holds an flock on the staging directory for as long as it writes
// into it; the kernel drops the lock when the writer dies, however it
// dies. So a staging directory nobody holds locked was left by a plugin
// killed mid-write, and the next start removes it at once, while the
// write in flight of another plugin pod (a rolling update), which holds
// its lock, is never disturbed.

// stagingPrefix starts the name of every staging directory of this
// Writer's driver, e.g. ".k8s.gpu.gpudra.io-staging-".
func (w *Writer) stagingPrefix() string { return "." + w.vendor + "-staging-" }

// writeStaged writes spec as the file name in w.dir through a staging
// directory.
func (w *Writer) writeStaged(spec *cdispecs.Spec, name string) (err error) {
	stage, err := os.MkdirTemp(w.dir, w.stagingPrefix())
	if err != nil {
		return fmt.Errorf("create staging directory: %w", err)
	}
	lock, lerr := lockDir(stage, 0)
	defer func() {
		if rerr := os.RemoveAll(stage); rerr != nil && err == nil {
			err = fmt.Errorf("remove staging directory: %w", rerr)
		}
		if lock != nil {
			_ = lock.Close()
		}
	}()
	if lerr != nil {
		return fmt.Errorf("lock staging directory: %w", lerr)
	}
	// A cache of the empty staging directory: creating it costs a scan of
	// nothing, and its WriteSpec validates and writes exactly as the
	// library always does.
	cache, err := cdi.NewCache(cdi.WithSpecDirs(stage), cdi.WithAutoRefresh(false))
	if err != nil {
		return fmt.Errorf("open staging directory: %w", err)
	}
	if err := cache.WriteSpec(spec, name); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(stage, name), filepath.Join(w.dir, name)); err != nil {
		return fmt.Errorf("move spec into place: %w", err)
	}
	return nil
}

// lockDir opens dir and takes an flock on it (how is 0 for a lock that
// waits, syscall.LOCK_NB for one that fails at once when it is held).
// Closing the file releases the lock.
func lockDir(dir string, how int) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|how); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// removeStaleStaging removes this driver's staging directories that no
// writer holds locked.
func (w *Writer) removeStaleStaging() error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("list CDI spec directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), w.stagingPrefix()) {
			continue
		}
		path := filepath.Join(w.dir, e.Name())
		lock, err := lockDir(path, syscall.LOCK_NB)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EWOULDBLOCK):
			continue // done meanwhile, or a write in flight
		case err != nil:
			errs = append(errs, err)
			continue
		}
		err = os.RemoveAll(path)
		_ = lock.Close()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove stale CDI staging directories: %w", err)
	}
	return nil
}
