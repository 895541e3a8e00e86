package cdispec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

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
// Whatever happens, the staging directory is removed afterwards, and one
// left by a plugin killed mid-write is removed at the next start once it
// is older than any write could be.

// staleStagingAge is how old a staging directory must be before New
// removes it: far longer than a write takes, so that the write in flight
// of another plugin pod (a rolling update) is never disturbed.
const staleStagingAge = time.Minute

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
	defer func() {
		if rerr := os.RemoveAll(stage); rerr != nil && err == nil {
			err = fmt.Errorf("remove staging directory: %w", rerr)
		}
	}()
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

// removeStaleStaging removes this driver's staging directories that are
// older than staleStagingAge.
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
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if time.Since(info.ModTime()) < staleStagingAge {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove stale CDI staging directories: %w", err)
	}
	return nil
}
