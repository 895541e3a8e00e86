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
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// multiarchDirs is where Debian's glibc of each architecture looks for
// libraries without an ld.so.cache (its built-in system directories), so
// a library put there is found by the interpreter alone.
var multiarchDirs = map[string]string{
	"amd64": "/lib/x86_64-linux-gnu",
	"arm64": "/lib/aarch64-linux-gnu",
}

// elfMachines is the ELF machine each architecture's binaries carry, so
// that a binary built for the wrong one is refused rather than packed.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// addELFLibs adds what bin needs to start on an image of arch, read from
// the ELF rather than by running it: its interpreter at the path the ELF
// names, and every DT_NEEDED library (and theirs), found under sysroot's
// lib directories, at arch's multiarch directory.
func (l *layer) addELFLibs(bin, sysroot, arch string) error {
	dir, ok := multiarchDirs[arch]
	if !ok {
		return fmt.Errorf("-libs: no library directory known for -arch %s (known: amd64, arm64)", arch)
	}
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("-libs: %s: %w", bin, err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != elfMachines[arch] {
		return fmt.Errorf("-libs: %s is built for %s, not for -arch %s", bin, f.Machine, arch)
	}
	interp, err := interpreter(f)
	if err != nil {
		return fmt.Errorf("-libs: %s: %w", bin, err)
	}
	if interp == "" {
		return nil // static
	}
	src, err := findLib(sysroot, path.Base(interp), arch)
	if err != nil {
		return err
	}
	if err := l.addFile(src, interp); err != nil {
		return err
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("-libs: %s: %w", bin, err)
	}
	seen := map[string]bool{path.Base(interp): true}
	// Every object's versioned symbols (GLIBC_2.34, …) must be defined by
	// the library packed for it: a binary linked against a newer glibc than
	// the sysroot's would otherwise fail on the node with "version
	// `GLIBC_2.38' not found", not here.
	found := map[string]string{}
	checks := []versionCheck{{bin, f}}
	for len(needed) > 0 {
		name := needed[0]
		needed = needed[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		src, err := findLib(sysroot, name, arch)
		if err != nil {
			return err
		}
		if err := l.addFile(src, path.Join(dir, name)); err != nil {
			return err
		}
		found[name] = src
		lf, err := elf.Open(src)
		if err != nil {
			return fmt.Errorf("-libs: %s: %w", src, err)
		}
		defer func() { _ = lf.Close() }()
		more, err := lf.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("-libs: %s: %w", src, err)
		}
		needed = append(needed, more...)
		checks = append(checks, versionCheck{src, lf})
	}
	for _, c := range checks {
		if err := c.satisfiedBy(found); err != nil {
			return fmt.Errorf("-libs %s: %w", sysroot, err)
		}
	}
	return nil
}

// versionCheck is one object whose symbol version needs are checked.
type versionCheck struct {
	path string
	f    *elf.File
}

// satisfiedBy checks that each library the object needs versions from
// (found: library name → its file in the sysroot) defines those versions.
func (c versionCheck) satisfiedBy(found map[string]string) error {
	if c.f.Section(".gnu.version_r") == nil {
		return nil // needs no symbol versions: nothing to check
	}
	needs, err := c.f.DynamicVersionNeeds()
	if err != nil {
		return fmt.Errorf("%s: its version needs: %w", c.path, err)
	}
	for _, n := range needs {
		src, ok := found[n.Name]
		if !ok {
			continue // the interpreter (ld-linux), packed at its own path
		}
		lf, err := elf.Open(src)
		if err != nil {
			return err
		}
		defs, err := lf.DynamicVersions()
		_ = lf.Close()
		if err != nil {
			return fmt.Errorf("%s: its version definitions: %w", src, err)
		}
		have := map[string]bool{}
		for _, d := range defs {
			have[d.Name] = true
		}
		for _, dep := range n.Needs {
			if !have[dep.Dep] {
				return fmt.Errorf("%s needs %s from %s, which the packed %s does not define: link it against this sysroot's libc (or an older one), not a newer one", c.path, dep.Dep, n.Name, src)
			}
		}
	}
	return nil
}

// interpreter is the ELF's PT_INTERP, "" for a static binary.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read its interpreter: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// findLib finds a library by file name under the sysroot's lib
// directories (a cross sysroot's lib, or a root file system's multiarch
// ones), following symlinks to the file itself.
func findLib(sysroot, name, arch string) (string, error) {
	triplet := path.Base(multiarchDirs[arch])
	for _, d := range []string{"lib", "lib/" + triplet, "lib64", "usr/lib", "usr/lib/" + triplet} {
		p := filepath.Join(sysroot, d, name)
		if _, err := os.Stat(p); err == nil {
			return filepath.EvalSymlinks(p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("-libs: %s is not in %s's lib directories", name, sysroot)
}
