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

package backend

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
)

// TestFakeSharedObject: the fake libraries are ELF shared objects whose
// SONAME debug/elf reads, as NVIDIA's container toolkit does.
func TestFakeSharedObject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libcuda.so.550.54.15")
	if err := os.WriteFile(path, fakeSharedObject("libcuda.so.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN || f.Machine != elf.EM_X86_64 {
		t.Errorf("type %v, machine %v", f.Type, f.Machine)
	}
	sonames, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(sonames) != 1 || sonames[0] != "libcuda.so.1" {
		t.Errorf("SONAME = %v, %v; want libcuda.so.1", sonames, err)
	}
}
