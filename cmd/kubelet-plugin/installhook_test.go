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

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstallCDIHook copies the hook beside the test binary into a
// directory, executable, replacing an older copy.
func TestInstallCDIHook(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(filepath.Dir(self), cdiHookName)
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hook\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(src) })
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, cdiHookName), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := installCDIHook(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, cdiHookName))
	if err != nil || fi.Mode().Perm() != 0o755 || fi.Size() != int64(len("#!/bin/sh\necho hook\n")) {
		t.Errorf("installed hook: %v, %v", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %v, want only the hook", entries)
	}
}
