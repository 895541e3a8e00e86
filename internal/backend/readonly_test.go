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
	"reflect"
	"regexp"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// The calls that change a GPU, as hack/readonlygen picks them.
var (
	objectPrefix = regexp.MustCompile(`^(Device|GpuInstance|ComputeInstance|VgpuInstance|VgpuType|System|Unit|EventSet|Gpm|Vgpu)?`)
	mutatingVerb = regexp.MustCompile(`^(Set|Reset|Clear|Create|Destroy|Freeze|PowerSmoothing|Force)`)
)

func isMutating(library bool, name string) bool {
	verb := name
	if library {
		verb = objectPrefix.ReplaceAllString(name, "")
	}
	return mutatingVerb.MatchString(verb) && name != "EventSetCreate"
}

// callEach calls every mutating method of v (a wrapper around mocks whose
// functions are all unset, so a call that reaches one panics) with zero
// arguments and reports those that were not refused.
func callEach(t *testing.T, v any, library bool) int {
	t.Helper()
	val := reflect.ValueOf(v)
	n := 0
	for i := 0; i < val.NumMethod(); i++ {
		m := val.Type().Method(i)
		if !isMutating(library, m.Name) {
			continue
		}
		n++
		args := make([]reflect.Value, m.Type.NumIn()-1)
		for j := range args {
			args[j] = reflect.Zero(m.Type.In(j + 1))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%T.%s reached the library: not refused (run go run ./hack/readonlygen > internal/backend/readonly_generated.go): %v", v, m.Name, p)
				}
			}()
			out := val.Method(i).Call(args)
			for _, o := range out {
				if ret, ok := o.Interface().(nvml.Return); ok && ret != nvml.ERROR_NO_PERMISSION {
					t.Errorf("%T.%s returned %v, want ERROR_NO_PERMISSION", v, m.Name, ret)
				}
			}
		}()
	}
	return n
}

// TestReadOnlyRefusesEveryMutation: every call of nvml.Interface, Device,
// GpuInstance and ComputeInstance that changes a GPU is refused before it
// reaches the library, and counted.
func TestReadOnlyRefusesEveryMutation(t *testing.T) {
	lib, r := readOnly(&mock.Interface{})
	total := callEach(t, lib, true)
	total += callEach(t, r.device(&mock.Device{}), false)
	total += callEach(t, r.gpuInstance(&mock.GpuInstance{}), false)
	total += callEach(t, r.computeInstance(&mock.ComputeInstance{}), false)
	if total < 90 || len(r.list()) != total {
		t.Errorf("%d mutating calls tried, %d refused", total, len(r.list()))
	}
}

// TestReadOnlyWrapsHandles: devices, GPU and compute instances reached
// through a read-only library are read-only too; reads pass through.
func TestReadOnlyWrapsHandles(t *testing.T) {
	ci := &mock.ComputeInstance{}
	gi := &mock.GpuInstance{
		GetComputeInstancesFunc: func(*nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
			return []nvml.ComputeInstance{ci}, nvml.SUCCESS
		},
	}
	dev := &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetGpuInstancesFunc: func(*nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
			return []nvml.GpuInstance{gi}, nvml.SUCCESS
		},
	}
	lib, r := readOnly(&mock.Interface{DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS }})
	d, _ := lib.DeviceGetHandleByIndex(0)
	if name, ret := d.GetName(); ret != nvml.SUCCESS || name != "NVIDIA H100 80GB HBM3" {
		t.Errorf("GetName through the wrapper: %q, %v", name, ret)
	}
	if _, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("SetMigMode: %v", ret)
	}
	if ret := d.SetComputeMode(nvml.COMPUTEMODE_EXCLUSIVE_PROCESS); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("SetComputeMode: %v", ret)
	}
	gis, _ := d.GetGpuInstances(nil)
	cis, _ := gis[0].GetComputeInstances(nil)
	if ret := cis[0].Destroy(); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("ComputeInstance.Destroy: %v", ret)
	}
	if ret := gis[0].Destroy(); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("GpuInstance.Destroy: %v", ret)
	}
	if got := fmt.Sprint(r.list()); got != "[SetMigMode SetComputeMode Destroy Destroy]" {
		t.Errorf("refused %s", got)
	}
}

// TestReadOnlyBackend: a read-only fake backend discovers the GPUs and
// finds the driver's files, and cannot create a MIG instance.
func TestReadOnlyBackend(t *testing.T) {
	ctx := context.Background()
	be, err := Open(ctx, Options{Kind: "fake", NodeName: "n", FakeProfile: "dgx-h100", FakeStateDir: t.TempDir(), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	node, err := be.Discover(ctx)
	if err != nil || len(node.GPUs) != 8 {
		t.Fatalf("discover: %d GPUs, %v", len(node.GPUs), err)
	}
	if len(be.CommonEdits(nil).Mounts) == 0 {
		t.Error("no driver files found through the read-only library")
	}
	if len(be.Refused()) != 0 {
		t.Errorf("discovery and the driver's files needed mutating calls: %v", be.Refused())
	}
}
