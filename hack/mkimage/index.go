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
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refNameAnnotation names an image in an OCI layout's index.json: what
// `ctr images import` and `skopeo copy oci-archive:` take as its name.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// runIndex writes the docker-archive images it is given as one
// multi-architecture image: an OCI image layout, as a tarball, whose
// index.json names one image index listing every image with its platform.
func runIndex(args []string) error {
	fl := flag.NewFlagSet("mkimage index", flag.ContinueOnError)
	out := fl.String("o", "", "output tarball (an OCI image layout)")
	tag := fl.String("t", "", "image reference the index is named by, e.g. ghcr.io/gpudra/gpudra:dev")
	if err := fl.Parse(args); err != nil {
		return err
	}
	archives := fl.Args()
	if *out == "" || *tag == "" || len(archives) == 0 {
		return errors.New("usage: mkimage index -o OUT.tar -t REF IMAGE.tar [IMAGE.tar …]")
	}
	ref, err := name.ParseReference(*tag)
	if err != nil {
		return err
	}
	var adds []mutate.IndexAddendum
	seen := map[string]string{}
	for _, a := range archives {
		img, err := tarball.ImageFromPath(a, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		platform := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
		if prev, dup := seen[platform.String()]; dup {
			return fmt.Errorf("%s and %s are both %s images: an index holds one image per platform", prev, a, platform.String())
		}
		seen[platform.String()] = a
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)

	dir, err := os.MkdirTemp("", "mkimage-index-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: ref.Name()})); err != nil {
		return err
	}
	if err := tarDir(dir, *out); err != nil {
		return err
	}
	d, _ := idx.Digest()
	fmt.Printf("%s: %s (index %s, %d platforms)\n", *out, ref.Name(), d, len(adds))
	return nil
}

// tarDir writes the files under dir into a tarball, sorted, owned by root,
// with zero timestamps, so that the same images give the same bytes.
func tarDir(dir, out string) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		st, err := os.Stat(p)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if st.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, st.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return errors.Join(err, f.Close())
		}
		if !st.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return errors.Join(err, f.Close())
			}
			if _, err := tw.Write(data); err != nil {
				return errors.Join(err, f.Close())
			}
		}
	}
	if err := tw.Close(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// runList prints what an OCI layout tarball (mkimage index's output)
// holds: each named index, its digest, and each image's platform, digest
// and version label, so that a release can show both architectures.
func runList(args []string, w io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: mkimage ls OCI.tar")
	}
	dir, err := os.MkdirTemp("", "mkimage-ls-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := untarTo(args[0], dir); err != nil {
		return err
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return fmt.Errorf("%s: %s is not an image index: %w", args[0], d.Digest, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s (%s)\n", d.Annotations[refNameAnnotation], d.Digest, d.MediaType)
		for _, e := range im.Manifests {
			img, err := idx.Image(e.Digest)
			if err != nil {
				return err
			}
			cf, err := img.ConfigFile()
			if err != nil {
				return err
			}
			size, err := imageSize(img)
			if err != nil {
				return err
			}
			var platform string
			if e.Platform != nil {
				platform = e.Platform.String()
			}
			fmt.Fprintf(w, "  %s %s version=%s revision=%s compressed=%d\n", platform, e.Digest,
				cf.Config.Labels["org.opencontainers.image.version"], cf.Config.Labels["org.opencontainers.image.revision"], size)
		}
	}
	return nil
}

// imageSize is what a pull downloads: the manifest's config and layers.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// untarTo unpacks a tarball of plain files and directories (what tarDir
// writes) into dir.
func untarTo(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the layout", archive, h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.Create(p)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				return errors.Join(err, out.Close())
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}
