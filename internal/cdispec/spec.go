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
	"errors"
	"fmt"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Device is one device of a claim's spec.
type Device struct {
	// Name is the suffix of the CDI device name, usually the DRA device
	// name (e.g. "gpu-0"); the full CDI name is "<claimUID>-<Name>".
	Name string
	// Edits are what a container needs for this device alone.
	Edits gpu.Edits
}

// WriteClaimSpec writes the claim's spec file, replacing any earlier one.
// common holds the edits every container with at least one of the devices
// gets once (control device nodes, driver files, the claim's settings);
// each device adds its own. The write is atomic, and one that fails leaves
// nothing behind.
func (w *Writer) WriteClaimSpec(claimUID string, common gpu.Edits, devices []Device) error {
	spec, err := w.buildSpec(claimUID, common, devices)
	if err != nil {
		return fmt.Errorf("CDI spec for claim %s: %w", claimUID, err)
	}
	if err := w.writeStaged(spec, w.specName(claimUID)+specExt); err != nil {
		return fmt.Errorf("write CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}

// buildSpec validates its input first, so that an error names the device
// whose edits are wrong; the CDI library validates the whole spec again when
// writing.
func (w *Writer) buildSpec(claimUID string, common gpu.Edits, devices []Device) (*cdispecs.Spec, error) {
	if err := validateClaimUID(claimUID); err != nil {
		return nil, err
	}
	if len(devices) == 0 {
		return nil, errors.New("no devices: a CDI spec must have at least one")
	}
	spec := &cdispecs.Spec{
		Kind:           w.Kind(),
		ContainerEdits: toCDI(common),
	}
	if err := validateEdits(spec.ContainerEdits); err != nil {
		return nil, fmt.Errorf("common edits: %w", err)
	}
	seen := make(map[string]bool, len(devices))
	for _, d := range devices {
		if d.Name == "" {
			return nil, errors.New("device with an empty name")
		}
		name := cdiDeviceName(claimUID, d.Name)
		if err := parser.ValidateDeviceName(name); err != nil {
			return nil, fmt.Errorf("device %q: not usable in a CDI device name: %w", d.Name, err)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("device %q listed twice", d.Name)
		}
		seen[d.Name] = true
		edits := toCDI(d.Edits)
		if err := validateEdits(edits); err != nil {
			return nil, fmt.Errorf("device %q: %w", d.Name, err)
		}
		spec.Devices = append(spec.Devices, cdispecs.Device{Name: name, ContainerEdits: edits})
	}
	// The oldest version that can express the spec lets the oldest
	// container runtimes read it.
	version, err := cdispecs.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("determine CDI version: %w", err)
	}
	spec.Version = version
	return spec, nil
}

// validateClaimUID rejects UIDs that would not make valid CDI device names
// or would escape the spec directory. Kubernetes UIDs are UUIDs and always
// pass.
func validateClaimUID(uid string) error {
	if uid == "" {
		return errors.New("empty claim UID")
	}
	if err := parser.ValidateDeviceName(uid); err != nil {
		return fmt.Errorf("claim UID %q cannot be part of a CDI device name: %w", uid, err)
	}
	return nil
}

func validateEdits(edits cdispecs.ContainerEdits) error {
	return (&cdi.ContainerEdits{ContainerEdits: &edits}).Validate()
}

// toCDI converts the device model's edits to CDI's. Empty lists stay nil so
// that the spec file holds no empty keys.
func toCDI(e gpu.Edits) cdispecs.ContainerEdits {
	var out cdispecs.ContainerEdits
	if len(e.Env) > 0 {
		out.Env = append([]string(nil), e.Env...)
	}
	for _, n := range e.DeviceNodes {
		out.DeviceNodes = append(out.DeviceNodes, &cdispecs.DeviceNode{Path: n.Path, HostPath: n.HostPath, Type: n.Type, Major: n.Major, Minor: n.Minor})
	}
	for _, m := range e.Mounts {
		out.Mounts = append(out.Mounts, &cdispecs.Mount{
			HostPath:      m.HostPath,
			ContainerPath: m.ContainerPath,
			Options:       append([]string(nil), m.Options...),
		})
	}
	for _, h := range e.Hooks {
		out.Hooks = append(out.Hooks, &cdispecs.Hook{
			HookName: h.Name,
			Path:     h.Path,
			Args:     append([]string(nil), h.Args...),
			Env:      append([]string(nil), h.Env...),
		})
	}
	return out
}
