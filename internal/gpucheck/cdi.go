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

package gpucheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/gpu"
)

// checkCDI writes the spec a claim of every GPU (and every existing MIG
// device) would get, with all driver capabilities, and checks that every
// host path in it exists.
func checkCDI(be *backend.Backend, node gpu.Node, driverName, dir string, s *Step) error {
	w, err := cdispec.New(dir, driverName)
	if err != nil {
		return err
	}
	var devs []cdispec.Device
	for _, g := range node.GPUs {
		devs = append(devs, cdispec.Device{Name: g.DeviceName(), Edits: be.DeviceEdits(g)})
		if g.MIG == nil {
			continue
		}
		// MIG devices an admin made: their capability device nodes.
		for _, in := range g.MIG.Instances {
			for _, ci := range in.ComputeInstances {
				e, err := be.MigDeviceEdits(g, in.GIID, ci, "")
				if err != nil {
					return fmt.Errorf("%s GPU instance %d, compute instance %d: %w", g.DeviceName(), in.GIID, ci, err)
				}
				devs = append(devs, cdispec.Device{Name: fmt.Sprintf("%s-gi%d-ci%d", g.DeviceName(), in.GIID, ci), Edits: e})
			}
		}
	}
	const uid = "00000000-0000-4000-8000-000000000000"
	if err := w.WriteClaimSpec(uid, be.CommonEdits([]string{"all"}), devs); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) != 1 {
		return fmt.Errorf("want one spec file in %s, found %v (%v)", dir, files, err)
	}
	spec, err := cdi.ReadSpec(files[0], 0)
	if err != nil {
		return fmt.Errorf("the CDI library cannot read the spec: %w", err)
	}
	var paths []string
	collect := func(e *cdispecs.ContainerEdits) {
		for _, d := range e.DeviceNodes {
			paths = append(paths, firstNonEmpty(d.HostPath, d.Path))
		}
		for _, m := range e.Mounts {
			paths = append(paths, m.HostPath)
		}
		for _, h := range e.Hooks {
			paths = append(paths, h.Path)
		}
	}
	raw := spec.Spec
	collect(&raw.ContainerEdits)
	for i := range raw.Devices {
		collect(&raw.Devices[i].ContainerEdits)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var missing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	s.Details = paths
	if len(missing) > 0 {
		s.Details = missing
		return fmt.Errorf("%d of %d path(s) the spec names do not exist (listed)", len(missing), len(paths))
	}
	s.Summary = fmt.Sprintf("%d device(s), %d path(s) named, all exist (kind %s)", len(raw.Devices), len(paths), raw.Kind)
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
