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

package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// capabilitySets are the driverCapabilities the golden files show.
var capabilitySets = [][]string{nil, {"compute"}, {"utility", "video"}, {"graphics", "display", "compat32"}, {"all"}}

// TestDriverEditsGolden pins, for each fake profile and capability set,
// the driver files and hooks a container gets (found by NVIDIA's
// container toolkit below the fake driver root), with the state directory
// written as $STATE. Rerun with -update after checking a change.
func TestDriverEditsGolden(t *testing.T) {
	for _, profile := range nvmlfake.Profiles() {
		t.Run(profile, func(t *testing.T) {
			dir := t.TempDir()
			be := openFakeBackend(t, profile, dir)
			doc := map[string]any{}
			for _, caps := range capabilitySets {
				e := be.CommonEdits(caps)
				var mounts, hooks []string
				for _, m := range e.Mounts {
					mounts = append(mounts, fmt.Sprintf("%s <- %s (%s)", m.ContainerPath, strings.Replace(m.HostPath, dir, "$STATE", 1), strings.Join(m.Options, ",")))
				}
				for _, h := range e.Hooks {
					hooks = append(hooks, fmt.Sprintf("%s: %s %s", h.Name, h.Path, strings.Join(h.Args[1:], " ")))
				}
				key := strings.Join(caps, ",")
				if key == "" {
					key = "(default)"
				}
				doc[key] = map[string]any{"env": e.Env, "mounts": mounts, "hooks": hooks}
			}
			got, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			gpudratest.GoldenFile(t, filepath.Join("testdata", "driver-edits", profile+".yaml"), got)
		})
	}
}

// TestDriverEdits checks what the golden files show: the libraries of the
// fake NVML's driver version at the distribution's path, the ld cache and
// symlink hooks, and the variable that keeps a legacy NVIDIA runtime from
// adding GPUs of its own.
func TestDriverEdits(t *testing.T) {
	be := openFakeBackend(t, "dgx-b200", t.TempDir())
	e := be.CommonEdits(nil)
	paths := map[string]string{}
	for _, m := range e.Mounts {
		paths[m.ContainerPath] = m.HostPath
	}
	for _, want := range []string{
		"/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.06",
		"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06",
		"/usr/bin/nvidia-smi",
		"/lib/firmware/nvidia/570.124.06/gsp_ga10x.bin",
	} {
		host, ok := paths[want]
		if !ok {
			t.Errorf("no mount at %s", want)
			continue
		}
		if _, err := os.Stat(host); err != nil {
			t.Errorf("%s is mounted from %s: %v", want, host, err)
		}
	}
	if _, ok := paths["/usr/lib/x86_64-linux-gnu/libnvidia-encode.so.570.124.06"]; ok {
		t.Error("a video library is mounted without the video capability")
	}
	var ldcache, symlinks bool
	for _, h := range e.Hooks {
		ldcache = ldcache || slices.Contains(h.Args, "update-ldcache")
		symlinks = symlinks || slices.Contains(h.Args, "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so")
		if h.Path != DefaultCDIHookPath || h.Name != "createContainer" {
			t.Errorf("hook %+v: want a createContainer hook of %s", h, DefaultCDIHookPath)
		}
	}
	if !ldcache || !symlinks {
		t.Errorf("hooks %+v: want the ld cache update and the libcuda.so symlink", e.Hooks)
	}
	if !slices.Contains(e.Env, "NVIDIA_VISIBLE_DEVICES=void") {
		t.Errorf("env %v lacks NVIDIA_VISIBLE_DEVICES=void", e.Env)
	}
}

// TestDriverEditsOperatorRoot: with the GPU Operator, the driver lives
// in /run/nvidia/driver on the host and is mounted into the plugin
// elsewhere; the specs must name the host's paths.
func TestDriverEditsOperatorRoot(t *testing.T) {
	srv, err := nvmlfake.New(nvmlfake.Options{Profile: "dgx-h100", NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Init()
	defer srv.Shutdown()
	mounted := filepath.Join(t.TempDir(), "driver-root")
	if err := writeFakeDriverRoot(mounted, "550.54.15"); err != nil {
		t.Fatal(err)
	}
	e, err := driverEdits(context.Background(), srv, driverRoot{path: mounted, hostPath: "/run/nvidia/driver"}, "/opt/hook")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range e.Mounts {
		if strings.HasPrefix(m.HostPath, mounted) {
			t.Errorf("mount %+v names the plugin's view of the driver root", m)
		}
		if m.ContainerPath == "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15" {
			found = m.HostPath == "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
		}
	}
	if !found {
		t.Errorf("libcuda is not mounted from /run/nvidia/driver: %+v", e.Mounts)
	}
	if len(e.Hooks) == 0 || e.Hooks[0].Path != "/opt/hook" {
		t.Errorf("hooks %+v, want /opt/hook", e.Hooks)
	}
}

func TestCapabilityOf(t *testing.T) {
	tests := map[string]string{
		"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15":         "compute",
		"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15":    "utility",
		"/usr/lib/x86_64-linux-gnu/libnvcuvid.so.550.54.15":      "video",
		"/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.550.54.15":   "graphics",
		"/usr/share/glvnd/egl_vendor.d/10_nvidia.json":           "graphics",
		"/usr/lib/xorg/modules/drivers/nvidia_drv.so":            "display",
		"/usr/lib/i386-linux-gnu/libcuda.so.550.54.15":           "compat32",
		"/usr/bin/nvidia-smi":                                    "utility",
		"/usr/bin/nvidia-cuda-mps-control":                       "compute",
		"/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin":           "",
		"/run/nvidia-persistenced/socket":                        "",
		"/usr/lib/x86_64-linux-gnu/libnvidia-future.so.550.54.1": "",
	}
	for path, want := range tests {
		if got := capabilityOf(path); got != want {
			t.Errorf("capabilityOf(%s) = %q, want %q", path, got, want)
		}
	}
	// Every capability users may configure is one the backend knows.
	known := []string{capCompute, capCompat32, capGraphics, capUtility, capVideo, capDisplay, capAll}
	for _, c := range configapi.SupportedDriverCapabilities {
		if !slices.Contains(known, c) {
			t.Errorf("driver capability %q of the config API is unknown to the backend", c)
		}
	}
	if !slices.Equal(defaultCapabilities, configapi.DefaultDriverCapabilities) {
		t.Errorf("default capabilities %v, the config API's %v", defaultCapabilities, configapi.DefaultDriverCapabilities)
	}
	// Files of no known capability stay.
	e := gpu.Edits{Mounts: []gpu.Mount{{ContainerPath: "/lib/firmware/nvidia/x"}, {ContainerPath: "/usr/bin/nvidia-smi"}}}
	if got := forCapabilities(e, []string{"compute"}); len(got.Mounts) != 1 || got.Mounts[0].ContainerPath != "/lib/firmware/nvidia/x" {
		t.Errorf("compute only: %+v", got.Mounts)
	}
}
