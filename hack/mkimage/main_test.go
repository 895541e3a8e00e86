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
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage writes an image with a file, a symlink and labels, and reads
// the tarball back as `docker load` and `ctr images import` would.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	err := run([]string{"-o", out, "-t", "example.com/tool:1.2.3",
		"-file", bin + ":/usr/bin/tool", "-symlink", "/usr/bin/kubectl-tool:tool", "-dir", "/tmp:1777",
		"-label", "org.opencontainers.image.version=1.2.3", "-label", "org.opencontainers.image.revision=abc=def",
		"-entrypoint", "/usr/bin/tool"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"org.opencontainers.image.version": "1.2.3", "org.opencontainers.image.revision": "abc=def"}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, cf.Config.Labels[k], v, cf.Config.Labels)
		}
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/bin/tool" {
		t.Errorf("entrypoint %v", cf.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	if h := entries["usr/bin/tool"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("usr/bin/tool missing or not executable: %+v", h)
	}
	if h := entries["usr/bin/kubectl-tool"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "tool" {
		t.Errorf("usr/bin/kubectl-tool is not a link to tool: %+v", h)
	}
	if h := entries["tmp/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("tmp/ is not a directory of mode 1777: %+v", h)
	}
	for _, bad := range [][]string{{"-symlink", "relative:tool"}, {"-label", "novalue"}, {"-dir", "/tmp:rwx"}} {
		args := append([]string{"-o", filepath.Join(dir, "bad.tar"), "-t", "example.com/x:1"}, bad...)
		if err := run(args); err == nil {
			t.Errorf("mkimage %v: no error", bad)
		}
	}
}

// TestIndex writes an amd64 and an arm64 image and their multi-architecture
// index, and reads the OCI layout back: one named index, one image per
// platform, each with its own architecture in its config.
func TestIndex(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var archives []string
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, arch+".tar")
		if err := run([]string{"-o", out, "-t", "example.com/tool:1.2.3", "-arch", arch, "-file", bin + ":/usr/bin/tool"}); err != nil {
			t.Fatal(err)
		}
		archives = append(archives, out)
	}
	out := filepath.Join(dir, "oci.tar")
	if err := run(append([]string{"index", "-o", out, "-t", "example.com/tool:1.2.3"}, archives...)); err != nil {
		t.Fatal(err)
	}
	if err := run(append([]string{"index", "-o", out, "-t", "example.com/tool:1.2.3"}, archives[0], archives[0])); err == nil {
		t.Error("an index of two amd64 images was written")
	}

	root := filepath.Join(dir, "layout")
	untar(t, out, root)
	top, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[refNameAnnotation] != "example.com/tool:1.2.3" {
		t.Fatalf("index.json lists %+v, want one index named example.com/tool:1.2.3", m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform == nil || d.Platform.Architecture != cf.Architecture {
			t.Errorf("manifest %s: platform %v, config says %s", d.Digest, d.Platform, cf.Architecture)
		}
		got[cf.OS+"/"+cf.Architecture] = true
	}
	if len(got) != 2 || !got["linux/amd64"] || !got["linux/arm64"] {
		t.Errorf("the index holds %v, want linux/amd64 and linux/arm64", got)
	}

	var ls bytes.Buffer
	if err := runList([]string{out}, &ls); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example.com/tool:1.2.3 sha256:", "\n  linux/amd64 sha256:", "\n  linux/arm64 sha256:"} {
		if !strings.Contains(ls.String(), want) {
			t.Errorf("mkimage ls printed no %q:\n%s", want, ls.String())
		}
	}
}

// TestAlsoTag: -also-tag names the one image by a second reference, both
// loadable from the archive.
func TestAlsoTag(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := run([]string{"-o", out, "-t", "example.com/tool:0.1.0-3-gabc", "-also-tag", "example.com/tool:0.1.0", "-file", bin + ":/usr/bin/tool"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ref := range []string{"example.com/tool:0.1.0-3-gabc", "example.com/tool:0.1.0"} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("%s from the archive: %v", ref, err)
		}
		id, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.String())
	}
	if ids[0] != ids[1] {
		t.Errorf("the two tags name different images: %v", ids)
	}
}

// TestELFLibs packs a dynamic binary of this host's architecture with
// -libs "/" (the host as its own sysroot): the image gets the interpreter
// the ELF names and libc at the multiarch path, and a binary of another
// architecture is refused. (The test binary itself is static: make test
// builds it without cgo.)
func TestELFLibs(t *testing.T) {
	self, interp := "", ""
	for _, candidate := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		f, err := elf.Open(candidate)
		if err != nil {
			continue
		}
		interp, err = interpreter(f)
		_ = f.Close()
		if err == nil && interp != "" {
			self = candidate
			break
		}
	}
	if self == "" {
		t.Skip("no dynamic binary among /bin/sh, /usr/bin/env, /bin/ls: no libraries to find")
	}
	dir, ok := multiarchDirs[runtime.GOARCH]
	if !ok {
		t.Skipf("no multiarch directory known for %s", runtime.GOARCH)
	}
	l := &layer{entries: map[string]entry{}}
	if err := l.addELFLibs(self, "/", runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.entries[interp]; !ok {
		t.Errorf("the interpreter %s is not in the image: %v", interp, keys(l.entries))
	}
	if _, ok := l.entries[dir+"/libc.so.6"]; !ok {
		t.Errorf("libc.so.6 is not in %s: %v", dir, keys(l.entries))
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if err := l.addELFLibs(self, "/", other); err == nil {
		t.Errorf("a %s binary was packed as %s", runtime.GOARCH, other)
	}

	// A libc that does not define the symbol versions the binary was
	// linked against (a newer glibc on the build host than in the
	// sysroot) is refused: here a library that defines none of them
	// stands in for libc.
	libc, err := findLib("/", "libc.so.6", runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := (versionCheck{self, f}).satisfiedBy(map[string]string{"libc.so.6": libc}); err != nil {
		t.Errorf("%s against the host's own libc: %v", self, err)
	}
	stand, err := findLib("/", "libz.so.1", runtime.GOARCH)
	if err != nil {
		t.Skipf("no libz.so.1 here to stand in for a libc without GLIBC versions: %v", err)
	}
	err = (versionCheck{self, f}).satisfiedBy(map[string]string{"libc.so.6": stand})
	if err == nil || !strings.Contains(err.Error(), "GLIBC_") {
		t.Errorf("%s against a libc that defines no GLIBC versions: %v, want a GLIBC_ version it lacks", self, err)
	}
}

func keys(m map[string]entry) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
