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

package version

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewManifest is the part of krew's Plugin (v1alpha2) that krew reads to
// install a plugin.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest runs hack/krew.sh on stand-in CLI binaries as
// hack/release.sh leaves them: one archive per platform holding the binary
// as kubectl-gpudra (executable) and the licence, a manifest naming each
// archive's download URL with its real sha256 and a selector for its
// platform, and the same bytes on a second run (reproducible).
func TestKrewManifest(t *testing.T) {
	dir := t.TempDir()
	plats := [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
	for _, p := range plats {
		if err := os.WriteFile(filepath.Join(dir, "gpudra-1.2.3-"+p[0]+"-"+p[1]), []byte("cli for "+p[0]+"/"+p[1]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// What else release.sh leaves there is not a CLI binary.
	for _, f := range []string{"gpudra-1.2.3.tgz", "gpudra-1.2.3.sbom.txt", "SHA256SUMS"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func() []byte {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "krew.sh"), "v1.2.3", dir)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/krew.sh: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "kubectl-gpudra.krew.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := run()
	var m krewManifest
	if err := yaml.UnmarshalStrict(first, &m); err != nil {
		t.Fatalf("the manifest does not parse: %v\n%s", err, first)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "gpudra" || m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" || m.Spec.Description == "" || m.Spec.Homepage == "" {
		t.Errorf("manifest header: %s %s %s %s %q", m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version, m.Spec.ShortDescription)
	}
	var seen [][2]string
	for _, p := range m.Spec.Platforms {
		os_, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		seen = append(seen, [2]string{os_, arch})
		archive := "kubectl-gpudra-1.2.3-" + os_ + "-" + arch + ".tar.gz"
		if p.URI != "https://github.com/gpudra/gpudra/releases/download/v1.2.3/"+archive || p.Bin != "kubectl-gpudra" {
			t.Errorf("%s/%s: uri %s, bin %s", os_, arch, p.URI, p.Bin)
		}
		data, err := os.ReadFile(filepath.Join(dir, archive))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != p.SHA256 {
			t.Errorf("%s: sha256 %s in the manifest, %x of the file", archive, p.SHA256, sum)
		}
		files := untar(t, data)
		if got := string(files["kubectl-gpudra"].data); got != "cli for "+os_+"/"+arch || files["kubectl-gpudra"].mode&0o111 == 0 {
			t.Errorf("%s: kubectl-gpudra is %q, mode %o", archive, got, files["kubectl-gpudra"].mode)
		}
		if _, ok := files["LICENSE"]; !ok || len(files) != 2 {
			t.Errorf("%s holds %d files, want kubectl-gpudra and LICENSE", archive, len(files))
		}
	}
	slices.SortFunc(seen, func(a, b [2]string) int { return bytes.Compare([]byte(a[0]+a[1]), []byte(b[0]+b[1])) })
	slices.SortFunc(plats, func(a, b [2]string) int { return bytes.Compare([]byte(a[0]+a[1]), []byte(b[0]+b[1])) })
	if !slices.Equal(seen, plats) {
		t.Errorf("platforms %v, want %v", seen, plats)
	}
	if again := run(); !bytes.Equal(first, again) {
		t.Errorf("a second run wrote another manifest (the archives are not reproducible):\n%s\n---\n%s", first, again)
	}
}

type tarFile struct {
	data []byte
	mode int64
}

func untar(t *testing.T, data []byte) map[string]tarFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]tarFile{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = tarFile{data: b, mode: h.Mode}
	}
}
