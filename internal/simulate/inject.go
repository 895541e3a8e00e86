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

package simulate

import (
	"fmt"
	"sort"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// Container is what a container receives from its CDI devices, as the
// container runtime would apply it.
type Container struct {
	Name        string
	CDIDevices  []string
	Env         []string
	DeviceNodes []string // "path (host path)"
	Mounts      []string // "host path -> container path"
	Hooks       []string // "<hook point>: <path> <args…>"
}

// Inject applies the CDI devices to an empty OCI spec with the CDI library,
// exactly as containerd or CRI-O do, reading the specs the plugin wrote.
func (c *Cluster) Inject(name string, ids []string) (Container, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(c.Opts.CDIDir()), cdi.WithAutoRefresh(false))
	if err != nil {
		return Container{}, fmt.Errorf("read CDI specs: %w", err)
	}
	spec := &rspec.Spec{Process: &rspec.Process{}, Linux: &rspec.Linux{}}
	if len(ids) > 0 {
		if _, err := cache.InjectDevices(spec, ids...); err != nil {
			return Container{}, fmt.Errorf("inject CDI devices %v: %w", ids, err)
		}
	}
	out := Container{Name: name, CDIDevices: ids, Env: append([]string(nil), spec.Process.Env...)}
	for _, d := range spec.Linux.Devices {
		out.DeviceNodes = append(out.DeviceNodes, d.Path)
	}
	for _, m := range spec.Mounts {
		out.Mounts = append(out.Mounts, m.Source+" -> "+m.Destination)
	}
	if h := spec.Hooks; h != nil {
		for _, hk := range h.CreateContainer {
			out.Hooks = append(out.Hooks, "createContainer: "+hk.Path+" "+strings.Join(hk.Args[1:], " "))
		}
	}
	sort.Strings(out.Env)
	return out, nil
}

// FakeDevices are the UUIDs of the fake GPUs and MIG devices the container
// got, sorted, from the variables the fake backend gives each device
// (GPUDRA_FAKE_GPU_<minor>, GPUDRA_FAKE_MIG_<minor>_<GPU instance>): what a
// workload on real GPUs would see as the GPUs whose device nodes it has.
func (ct Container) FakeDevices() []string {
	var out []string
	for _, kv := range ct.Env {
		key, val, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "GPUDRA_FAKE_GPU_") || strings.HasPrefix(key, "GPUDRA_FAKE_MIG_") {
			out = append(out, val)
		}
	}
	sort.Strings(out)
	return out
}

// EnvValue returns the value of an environment variable in the container.
func (ct Container) EnvValue(key string) (string, bool) {
	for _, kv := range ct.Env {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			return kv[len(key)+1:], true
		}
	}
	return "", false
}
