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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Claim UIDs as Kubernetes makes them.
const (
	uidA = "7c1f2a9e-3b4d-4e5f-8a6b-9c0d1e2f3a4b"
	uidB = "0e9d8c7b-6a5f-4e3d-2c1b-0a9f8e7d6c5b"
)

// commonEdits stand in for what every GPU container needs; /dev/null is a
// real character device, so the runtime's view of it can be checked.
func commonEdits(t *testing.T) gpu.Edits {
	return gpu.Edits{
		Env:         []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility"},
		DeviceNodes: []gpu.DeviceNode{{Path: "/dev/nvidiactl", HostPath: "/dev/null"}},
		Mounts: []gpu.Mount{{
			HostPath:      t.TempDir(),
			ContainerPath: "/usr/lib/gpudra",
			Options:       []string{"ro", "nosuid", "nodev", "bind"},
		}},
		Hooks: []gpu.Hook{{
			Name: "createContainer",
			Path: "/var/lib/gpudra/bin/nvidia-cdi-hook",
			Args: []string{"nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/gpudra"},
		}},
	}
}

func gpuDevice(minor string) Device {
	return Device{
		Name: "gpu-" + minor,
		Edits: gpu.Edits{
			Env:         []string{"GPUDRA_TEST_GPU_" + minor + "=GPU-" + minor},
			DeviceNodes: []gpu.DeviceNode{{Path: "/dev/nvidia" + minor, HostPath: "/dev/null"}},
		},
	}
}

func newWriter(t *testing.T) *Writer {
	t.Helper()
	w, err := New(filepath.Join(t.TempDir(), "cdi"), "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return w
}

// inject resolves ids the way a container runtime does: a fresh cache over
// the spec directory, then injection into an OCI spec.
func inject(t *testing.T, dir string, ids ...string) *oci.Spec {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Refresh(); err != nil {
		t.Fatalf("the CDI library rejects the spec directory: %v", err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("InjectDevices(%v): unresolved %v: %v", ids, unresolved, err)
	}
	return spec
}

func TestWriteClaimSpecInjects(t *testing.T) {
	tests := []struct {
		name        string
		devices     []Device
		inject      []string // device names to inject
		wantEnv     []string
		wantNoEnv   []string
		wantDevices []string // container paths
	}{
		{
			name:        "one GPU",
			devices:     []Device{gpuDevice("0")},
			inject:      []string{"gpu-0"},
			wantEnv:     []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "GPUDRA_TEST_GPU_0=GPU-0"},
			wantDevices: []string{"/dev/nvidiactl", "/dev/nvidia0"},
		},
		{
			name:        "two GPUs, both injected",
			devices:     []Device{gpuDevice("0"), gpuDevice("1")},
			inject:      []string{"gpu-0", "gpu-1"},
			wantEnv:     []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "GPUDRA_TEST_GPU_0=GPU-0", "GPUDRA_TEST_GPU_1=GPU-1"},
			wantDevices: []string{"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"},
		},
		{
			name:        "two GPUs, a container that uses only the second",
			devices:     []Device{gpuDevice("0"), gpuDevice("1")},
			inject:      []string{"gpu-1"},
			wantEnv:     []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "GPUDRA_TEST_GPU_1=GPU-1"},
			wantNoEnv:   []string{"GPUDRA_TEST_GPU_0=GPU-0"},
			wantDevices: []string{"/dev/nvidiactl", "/dev/nvidia1"},
		},
		{
			name:        "a MIG device name",
			devices:     []Device{{Name: "gpu-0-mig-1g10gb-3", Edits: gpu.Edits{Env: []string{"MIG=1"}}}},
			inject:      []string{"gpu-0-mig-1g10gb-3"},
			wantEnv:     []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "MIG=1"},
			wantDevices: []string{"/dev/nvidiactl"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t)
			common := commonEdits(t)
			if err := w.WriteClaimSpec(uidA, common, tc.devices); err != nil {
				t.Fatalf("WriteClaimSpec: %v", err)
			}
			var ids []string
			for _, name := range tc.inject {
				ids = append(ids, w.DeviceID(uidA, name))
			}
			spec := inject(t, w.Dir(), ids...)

			for _, env := range tc.wantEnv {
				if !slices.Contains(spec.Process.Env, env) {
					t.Errorf("env %q missing from %v", env, spec.Process.Env)
				}
			}
			for _, env := range tc.wantNoEnv {
				if slices.Contains(spec.Process.Env, env) {
					t.Errorf("env %q of a device not injected is in %v", env, spec.Process.Env)
				}
			}
			var paths []string
			for _, d := range spec.Linux.Devices {
				paths = append(paths, d.Path)
				// The runtime fills in what the host path is.
				if d.Type != "c" || d.Major != 1 || d.Minor != 3 {
					t.Errorf("device %s = %s %d:%d, want /dev/null's c 1:3", d.Path, d.Type, d.Major, d.Minor)
				}
			}
			slices.Sort(paths)
			slices.Sort(tc.wantDevices)
			if !slices.Equal(paths, tc.wantDevices) {
				t.Errorf("device nodes = %v, want %v", paths, tc.wantDevices)
			}
			if len(spec.Mounts) != 1 || spec.Mounts[0].Destination != "/usr/lib/gpudra" ||
				spec.Mounts[0].Source != common.Mounts[0].HostPath ||
				!slices.Equal(spec.Mounts[0].Options, common.Mounts[0].Options) {
				t.Errorf("mounts = %+v, want the common mount once", spec.Mounts)
			}
			if spec.Hooks == nil || len(spec.Hooks.CreateContainer) != 1 ||
				spec.Hooks.CreateContainer[0].Path != common.Hooks[0].Path ||
				!slices.Equal(spec.Hooks.CreateContainer[0].Args, common.Hooks[0].Args) {
				t.Errorf("hooks = %+v, want the common createContainer hook once", spec.Hooks)
			}
		})
	}
}

func TestSpecFile(t *testing.T) {
	tests := []struct {
		name        string
		uid         string
		devices     []Device
		wantVersion string
	}{
		// Host paths on device nodes came with CDI 0.5.0.
		{name: "device nodes with host paths", uid: uidA, devices: []Device{gpuDevice("0")}, wantVersion: "0.5.0"},
		// So did device names that start with a digit (most UUIDs do).
		{name: "UID starting with a digit", uid: "0abc", devices: []Device{{Name: "gpu-0", Edits: gpu.Edits{Env: []string{"A=1"}}}}, wantVersion: "0.5.0"},
		{name: "nothing newer than the first spec", uid: "abc", devices: []Device{{Name: "gpu-0", Edits: gpu.Edits{Env: []string{"A=1"}}}}, wantVersion: "0.3.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t)
			if err := w.WriteClaimSpec(tc.uid, gpu.Edits{}, tc.devices); err != nil {
				t.Fatalf("WriteClaimSpec: %v", err)
			}
			path := filepath.Join(w.Dir(), "k8s.gpu.gpudra.io-claim_"+tc.uid+".yaml")
			spec, err := cdi.ReadSpec(path, 0)
			if err != nil {
				t.Fatalf("ReadSpec(%s): %v", path, err)
			}
			if spec.Kind != "k8s.gpu.gpudra.io/claim" {
				t.Errorf("kind = %q", spec.Kind)
			}
			if spec.Version != tc.wantVersion {
				t.Errorf("cdiVersion = %q, want %q", spec.Version, tc.wantVersion)
			}
			if len(spec.ContainerEdits.Env) != 0 || spec.ContainerEdits.DeviceNodes != nil {
				t.Errorf("empty common edits written as %+v", spec.ContainerEdits)
			}
		})
	}
}

func TestRewriteReplacesTheClaimSpec(t *testing.T) {
	w := newWriter(t)
	if err := w.WriteClaimSpec(uidA, commonEdits(t), []Device{gpuDevice("0")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteClaimSpec(uidA, commonEdits(t), []Device{gpuDevice("1")}); err != nil {
		t.Fatal(err)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(w.Dir()), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{w.DeviceID(uidA, "gpu-1")}
	if got := cache.ListDevices(); !slices.Equal(got, want) {
		t.Errorf("devices after rewrite = %v, want %v", got, want)
	}
	entries, _ := os.ReadDir(w.Dir())
	if len(entries) != 1 {
		t.Errorf("spec directory holds %d entries after a rewrite, want 1", len(entries))
	}
}

func TestWriteClaimSpecRejects(t *testing.T) {
	good := gpuDevice("0")
	tests := []struct {
		name    string
		uid     string
		common  gpu.Edits
		devices []Device
		wantErr string
	}{
		{
			name:    "environment variable without a value",
			uid:     uidA,
			devices: []Device{{Name: "gpu-0", Edits: gpu.Edits{Env: []string{"NVIDIA_VISIBLE_DEVICES"}}}},
			wantErr: `CDI spec for claim ` + uidA + `: device "gpu-0": invalid container edits: invalid environment variable "NVIDIA_VISIBLE_DEVICES"`,
		},
		{
			name:    "bad common environment",
			uid:     uidA,
			common:  gpu.Edits{Env: []string{"=x"}},
			devices: []Device{good},
			wantErr: `common edits: invalid container edits: invalid environment variable "=x"`,
		},
		{
			name:    "device node without a path",
			uid:     uidA,
			devices: []Device{{Name: "gpu-0", Edits: gpu.Edits{DeviceNodes: []gpu.DeviceNode{{HostPath: "/dev/null"}}}}},
			wantErr: `device "gpu-0": invalid (empty) device path`,
		},
		{
			name:    "mount without a container path",
			uid:     uidA,
			common:  gpu.Edits{Mounts: []gpu.Mount{{HostPath: "/usr/lib"}}},
			devices: []Device{good},
			wantErr: `common edits: invalid mount, empty container path`,
		},
		{name: "no devices", uid: uidA, wantErr: "no devices"},
		{name: "device listed twice", uid: uidA, devices: []Device{good, good}, wantErr: `device "gpu-0" listed twice`},
		{name: "empty device name", uid: uidA, devices: []Device{{}}, wantErr: "empty name"},
		{name: "bad device name", uid: uidA, devices: []Device{{Name: "gpu 0"}}, wantErr: `device "gpu 0": not usable in a CDI device name`},
		{name: "empty claim UID", uid: "", devices: []Device{good}, wantErr: "empty claim UID"},
		{name: "claim UID with a slash", uid: "../x", devices: []Device{good}, wantErr: `claim UID "../x" cannot be part of a CDI device name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t)
			err := w.WriteClaimSpec(tc.uid, tc.common, tc.devices)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteClaimSpec error = %v, want one containing %q", err, tc.wantErr)
			}
			if entries, _ := os.ReadDir(w.Dir()); len(entries) != 0 {
				t.Errorf("a rejected spec left %d files behind", len(entries))
			}
		})
	}
}

// TestCharDeviceNumbers: a device node given its type and numbers (an IMEX
// channel, which does not exist on the host) reaches the container with
// them, not with those of the path on the host.
func TestCharDeviceNumbers(t *testing.T) {
	w := newWriter(t)
	ch := Device{Name: "channel-5", Edits: gpu.Edits{
		Env: []string{"GPUDRA_IMEX_CHANNEL=5"},
		DeviceNodes: []gpu.DeviceNode{{
			Path: "/dev/nvidia-caps-imex-channels/channel5", HostPath: "/dev/nvidia-caps-imex-channels/channel5",
			Type: "c", Major: 234, Minor: 5,
		}},
	}}
	if err := w.WriteClaimSpec(uidA, commonEdits(t), []Device{ch}); err != nil {
		t.Fatal(err)
	}
	spec := inject(t, w.Dir(), w.DeviceID(uidA, "channel-5"))
	var found bool
	for _, d := range spec.Linux.Devices {
		if d.Path == "/dev/nvidia-caps-imex-channels/channel5" {
			found = true
			if d.Type != "c" || d.Major != 234 || d.Minor != 5 {
				t.Errorf("channel node %s %d:%d, want c 234:5", d.Type, d.Major, d.Minor)
			}
		}
	}
	if !found {
		t.Errorf("no channel node in the container: %+v", spec.Linux.Devices)
	}
}
