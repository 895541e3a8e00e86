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
	"fmt"
	"os"
	"path/filepath"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/gpudra/gpudra/internal/gpu"
)

const (
	// Class is the CDI device class of every claim's devices.
	Class = "claim"
	// specExt selects the encoding the CDI library writes: YAML, which is
	// what an admin looking at /var/run/cdi expects to read.
	specExt = ".yaml"
)

// Writer writes, lists and removes the claim specs in one CDI spec
// directory. It is safe for concurrent use; writes for different claims do
// not interfere.
type Writer struct {
	dir    string
	vendor string
	// cache is used only to remove specs. It is never refreshed, so other
	// spec files in the directory cost nothing. (Writes go through a
	// staging directory of their own: see staging.go.)
	cache *cdi.Cache
}

// New returns a Writer for the spec directory dir (usually /var/run/cdi, so
// that a reboot, which tears down every prepared device, also removes the
// specs), creating dir if missing. driverName is the DRA driver name; the
// CDI vendor is "k8s." + driverName.
func New(dir, driverName string) (*Writer, error) {
	if driverName == "" {
		driverName = gpu.DefaultDriverName
	}
	vendor := "k8s." + driverName
	if err := parser.ValidateVendorName(vendor); err != nil {
		return nil, fmt.Errorf("driver name %q cannot be used as a CDI vendor: %w", driverName, err)
	}
	if dir == "" {
		return nil, fmt.Errorf("no CDI spec directory given")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create CDI spec directory: %w", err)
	}
	w := &Writer{dir: dir, vendor: vendor}
	// A plugin killed in the middle of a write left its staging
	// directory; it is of no use to anyone now.
	if err := w.removeStaleStaging(); err != nil {
		return nil, err
	}
	// NewCache scans dir once; auto-refresh would start a file watcher
	// that a writer does not need.
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("open CDI spec directory %s: %w", dir, err)
	}
	w.cache = cache
	return w, nil
}

// Dir is the spec directory.
func (w *Writer) Dir() string { return w.dir }

// Kind is the CDI kind of the claim specs, e.g. "k8s.gpu.gpudra.io/claim".
func (w *Writer) Kind() string { return w.vendor + "/" + Class }

// DeviceID returns the fully qualified CDI device ID of one device of a
// claim, e.g. "k8s.gpu.gpudra.io/claim=<claimUID>-gpu-0": what the kubelet
// passes to the container runtime. It depends only on its arguments, so a
// repeated prepare of the same claim returns the same IDs.
func (w *Writer) DeviceID(claimUID, name string) string {
	return parser.QualifiedName(w.vendor, Class, cdiDeviceName(claimUID, name))
}

// cdiDeviceName is the unqualified name of a claim's device in its spec.
// The claim UID keeps the names of different claims apart: the runtime
// resolves names across every spec file of the vendor and class.
func cdiDeviceName(claimUID, name string) string { return claimUID + "-" + name }

// SpecFileGlob is the shell pattern that matches the spec files of every
// claim of this driver, e.g. "/var/run/cdi/k8s.gpu.gpudra.io-claim_*": for
// messages that tell an admin which files are gpudra's.
func (w *Writer) SpecFileGlob() string {
	return filepath.Join(w.dir, w.specName("")+"*")
}

// specName is the claim's spec file name without extension, deterministic
// so that a rewrite replaces the claim's spec and a remove finds it.
func (w *Writer) specName(claimUID string) string {
	return cdi.GenerateTransientSpecName(w.vendor, Class, claimUID)
}
