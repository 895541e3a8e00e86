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

// Command mkimage writes a container image as a docker-archive tarball with no
// Docker daemon and no registry: one layer made from host files, an image
// config, a tag. `ctr images import`, `docker load` and `kind load
// image-archive` all accept the result.
//
//	mkimage -o plugin.tar -t ghcr.io/gpudra/gpudra:dev -ldd \
//	    -file bin/gpudra-kubelet-plugin:/usr/bin/gpudra-kubelet-plugin \
//	    -entrypoint /usr/bin/gpudra-kubelet-plugin
//
// -ldd adds the shared libraries each -file needs (as ldd resolves them on
// this host), so a cgo binary runs on an otherwise empty image. For an
// image of another architecture, where ldd cannot run the binary, -arch
// names it and -libs SYSROOT adds the libraries the ELF itself names (its
// interpreter and DT_NEEDED entries, recursively) from a cross sysroot such
// as /usr/aarch64-linux-gnu (Debian's libc6-dev-arm64-cross). -root adds a
// whole directory tree, symlinks kept; -symlink adds one link, -dir an
// empty directory. -label sets
// the image's labels (the OCI annotations org.opencontainers.image.*).
// Files are owned by root; timestamps are zero, so the same inputs give the
// same image ID.
//
//	mkimage index -o gpudra-oci.tar -t ghcr.io/gpudra/gpudra:dev amd64.tar arm64.tar
//
// writes a multi-architecture image: an OCI image layout (as a tarball)
// whose index lists each docker-archive image with its platform, for
// `crane push`, `skopeo copy oci-archive:…` or `ctr images import`.
//
//	mkimage ls gpudra-oci.tar
//
// lists such a tarball: the index, and each image's platform, digest,
// version label and compressed size.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "index" {
		return runIndex(args[1:])
	}
	if len(args) > 0 && args[0] == "ls" {
		return runList(args[1:], os.Stdout)
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(o.tag)
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	var extra []name.Reference
	for _, t := range o.alsoTags {
		r, err := name.ParseReference(t)
		if err != nil {
			return fmt.Errorf("-also-tag %q: %w", t, err)
		}
		extra = append(extra, r)
	}
	l, err := o.layer()
	if err != nil {
		return err
	}
	imageLabels, err := o.imageLabels()
	if err != nil {
		return err
	}
	data, err := l.tar()
	if err != nil {
		return err
	}
	img, err := o.image(data, imageLabels)
	if err != nil {
		return err
	}
	refs[ref] = img
	for _, r := range extra {
		refs[r] = img
	}
	if err := tarball.MultiRefWriteToFile(o.out, refs); err != nil {
		return err
	}
	id, _ := img.ConfigName()
	fmt.Printf("%s: %s (%s, %d files, %d bytes uncompressed)\n", o.out, ref.Name(), id, len(l.entries), len(data))
	return nil
}

// options are mkimage's flags for one image (the package doc says what
// each does).
type options struct {
	out, tag string
	// ldd, or libs (a sysroot) for an image of another arch, add the
	// shared libraries of every file.
	ldd        bool
	arch, libs string
	// What goes in the layer.
	files, roots, symlinks, dirs multi
	// What goes in the config.
	labels, entrypoint, cmd, env multi
	alsoTags                     multi
}

// parseFlags reads the flags for one image and checks they go together.
func parseFlags(args []string) (*options, error) {
	var o options
	fl := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fl.StringVar(&o.out, "o", "", "output tarball (docker-archive)")
	fl.StringVar(&o.tag, "t", "", "image reference, e.g. ghcr.io/gpudra/gpudra:dev")
	fl.BoolVar(&o.ldd, "ldd", false, "also add the shared libraries of every -file, as ldd resolves them")
	fl.StringVar(&o.arch, "arch", runtime.GOARCH, "the image's architecture, as GOARCH names it (amd64, arm64)")
	fl.StringVar(&o.libs, "libs", "", "SYSROOT: also add the shared libraries every -file's ELF names, from this cross sysroot (for -arch other than the host's)")
	fl.Var(&o.alsoTags, "also-tag", "another image reference the archive names the same image by (repeatable)")
	fl.Var(&o.files, "file", "SRC:DST, a host file and its path in the image (repeatable)")
	fl.Var(&o.symlinks, "symlink", "DST:TARGET, a symbolic link in the image (repeatable)")
	fl.Var(&o.dirs, "dir", "DST:MODE, an empty directory in the image, e.g. /tmp:1777 (repeatable)")
	fl.Var(&o.labels, "label", "KEY=VALUE, an image label (repeatable)")
	fl.Var(&o.roots, "root", "a directory whose tree becomes the image's / (repeatable)")
	fl.Var(&o.entrypoint, "entrypoint", "entrypoint argument (repeatable)")
	fl.Var(&o.cmd, "cmd", "cmd argument (repeatable)")
	fl.Var(&o.env, "env", "KEY=VALUE (repeatable)")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if o.out == "" || o.tag == "" {
		return nil, errors.New("-o and -t are required")
	}
	if o.ldd && o.libs != "" {
		return nil, errors.New("-ldd and -libs exclude each other: ldd resolves the host's libraries, -libs a sysroot's")
	}
	if o.ldd && o.arch != runtime.GOARCH {
		return nil, fmt.Errorf("-ldd resolves %s libraries on this host; for -arch %s use -libs SYSROOT", runtime.GOARCH, o.arch)
	}
	return &o, nil
}

// layer is the image's one layer: the -root trees, then the -file files
// with their libraries, the -symlink links and the -dir directories.
func (o *options) layer() (*layer, error) {
	l := &layer{entries: map[string]entry{}}
	for _, r := range o.roots {
		if err := l.addTree(r); err != nil {
			return nil, err
		}
	}
	for _, f := range o.files {
		if err := o.addFile(l, f); err != nil {
			return nil, err
		}
	}
	for _, sl := range o.symlinks {
		dst, target, ok := strings.Cut(sl, ":")
		if !ok || !path.IsAbs(dst) || target == "" {
			return nil, fmt.Errorf("-symlink %q: want /absolute/DST:TARGET", sl)
		}
		l.addSymlink(dst, target)
	}
	for _, d := range o.dirs {
		dst, mode, ok := strings.Cut(d, ":")
		m, err := strconv.ParseUint(mode, 8, 32)
		if !ok || !path.IsAbs(dst) || err != nil {
			return nil, fmt.Errorf("-dir %q: want /absolute/DST:octal mode", d)
		}
		l.addDirs(dst + "/x")
		e := l.entries[dst]
		e.hdr.Mode = int64(m)
		l.entries[dst] = e
	}
	return l, nil
}

// addFile adds one -file SRC:DST to the layer and, with -ldd or -libs,
// the shared libraries it needs.
func (o *options) addFile(l *layer, f string) error {
	src, dst, ok := strings.Cut(f, ":")
	if !ok || !path.IsAbs(dst) {
		return fmt.Errorf("-file %q: want SRC:/absolute/DST", f)
	}
	if err := l.addFile(src, dst); err != nil {
		return err
	}
	switch {
	case o.ldd:
		return l.addLibs(src)
	case o.libs != "":
		return l.addELFLibs(src, o.libs, o.arch)
	}
	return nil
}

// imageLabels are the -label flags, by key.
func (o *options) imageLabels() (map[string]string, error) {
	imageLabels := map[string]string{}
	for _, kv := range o.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-label %q: want KEY=VALUE", kv)
		}
		imageLabels[k] = v
	}
	return imageLabels, nil
}

// image is the image of the layer's tarball (data) with its config:
// platform, entrypoint, command, environment, labels, and a zero creation
// time so that the same inputs give the same image ID.
func (o *options) image(data []byte, imageLabels map[string]string) (v1.Image, error) {
	lay, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, lay)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = o.entrypoint
	cf.Config.Cmd = o.cmd
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, o.env...)
	if len(imageLabels) > 0 {
		cf.Config.Labels = imageLabels
	}
	return mutate.ConfigFile(img, cf)
}

type entry struct {
	hdr  tar.Header
	data []byte
}

type layer struct{ entries map[string]entry }

func (l *layer) addDirs(p string) {
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.entries[d] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}}
		}
	}
}

// addFile copies src (following symlinks) to dst.
func (l *layer) addFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory; use -root", src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	l.addDirs(dst)
	l.entries[dst] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: int64(st.Mode().Perm()), Size: int64(len(b))}, data: b}
	return nil
}

func (l *layer) addSymlink(dst, target string) {
	l.addDirs(dst)
	l.entries[dst] = entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: dst, Linkname: target, Mode: 0o777}}
}

func (l *layer) addTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		dst := "/" + filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.addSymlink(dst, t)
		case d.IsDir():
			l.addDirs(dst + "/x")
		default:
			return l.addFile(p, dst)
		}
		return nil
	})
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// addLibs adds every library ldd lists for bin, at the path ldd prints, plus
// the file the path resolves to when it is a symlink.
func (l *layer) addLibs(bin string) error {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil
		}
		return fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	sort.Strings(libs)
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return err
		}
		if err := l.addFile(real, real); err != nil {
			return err
		}
		if real != lib {
			l.addSymlink(lib, real)
		}
	}
	return nil
}

func (l *layer) tar() ([]byte, error) {
	names := make([]string, 0, len(l.entries))
	for n := range l.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := l.entries[n]
		h := e.hdr
		h.Name = strings.TrimPrefix(h.Name, "/")
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.ModTime = time.Unix(0, 0)
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
