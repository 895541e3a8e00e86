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
	"io"
	"os"
	"path/filepath"
	"testing"

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
