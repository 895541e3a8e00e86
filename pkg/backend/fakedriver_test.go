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
