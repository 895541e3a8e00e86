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
	"slices"
	"strings"
)

// specExts are the extensions a claim spec may have: WriteClaimSpec writes
// specExt, but a spec written by another gpudra version in the other
// encoding must still be found and removed.
var specExts = []string{".yaml", ".json"}

// RemoveClaimSpec removes the claim's spec file. It is idempotent: a spec
// that is already gone is not an error.
func (w *Writer) RemoveClaimSpec(claimUID string) error {
	if err := validateClaimUID(claimUID); err != nil {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	for _, ext := range specExts {
		if err := w.cache.RemoveSpec(w.specName(claimUID) + ext); err != nil {
			return fmt.Errorf("remove CDI spec for claim %s: %w", claimUID, err)
		}
	}
	return nil
}

// ClaimSpecExists tells whether the claim's spec file is present, e.g. to
// rewrite the specs of prepared claims after a reboot emptied /var/run/cdi.
func (w *Writer) ClaimSpecExists(claimUID string) (bool, error) {
	if err := validateClaimUID(claimUID); err != nil {
		return false, fmt.Errorf("look up CDI spec: %w", err)
	}
	for _, ext := range specExts {
		_, err := os.Stat(filepath.Join(w.dir, w.specName(claimUID)+ext))
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, fs.ErrNotExist):
			return false, fmt.Errorf("look up CDI spec for claim %s: %w", claimUID, err)
		}
	}
	return false, nil
}

// ListClaimUIDs returns, sorted, the UIDs of the claims that have a spec
// file of this driver in the directory, so that start-up can remove the
// specs of claims that are no longer prepared. It goes by file name alone,
// so a spec that no longer parses is found too.
func (w *Writer) ListClaimUIDs() ([]string, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list CDI specs: %w", err)
	}
	prefix := w.specName("")
	var uids []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		ext := filepath.Ext(e.Name())
		if !slices.Contains(specExts, ext) {
			continue
		}
		uid, ok := strings.CutPrefix(strings.TrimSuffix(e.Name(), ext), prefix)
		if !ok || validateClaimUID(uid) != nil {
			continue
		}
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}
