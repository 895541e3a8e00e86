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

package nvmlfake

import (
	"reflect"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// callAll calls every method of the interface type iface on v with zero
// arguments and reports the first panic.
func callAll(t *testing.T, what string, iface reflect.Type, v any, skip ...string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if slices.Contains(skip, m.Name) {
			continue
		}
		args := make([]reflect.Value, m.Type.NumIn())
		for j := range args {
			args[j] = reflect.Zero(m.Type.In(j))
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s.%s panicked: %v", what, m.Name, r)
				}
			}()
			rv.MethodByName(m.Name).Call(args)
		}()
	}
}

func TestNoMethodPanics(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	gi, ci := makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 4)
	mig, _ := d.GetMigDeviceHandleByIndex(0)

	// Init and Shutdown would change the library's state under the loop;
	// Destroy would remove the handles being tested.
	callAll(t, "Interface", reflect.TypeFor[nvml.Interface](), nvml.Interface(s), "Init", "InitWithFlags", "Shutdown")
	callAll(t, "Device", reflect.TypeFor[nvml.Device](), d)
	callAll(t, "MIG device", reflect.TypeFor[nvml.Device](), mig)
	callAll(t, "GpuInstance", reflect.TypeFor[nvml.GpuInstance](), gi, "Destroy")
	callAll(t, "ComputeInstance", reflect.TypeFor[nvml.ComputeInstance](), ci, "Destroy")
	set, _ := s.EventSetCreate()
	callAll(t, "EventSet", reflect.TypeFor[nvml.EventSet](), set)
}

func TestUnsetMethodsAreNotSupported(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	if _, ret := d.GetSerial(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetSerial = %v", ret)
	}
	if _, ret := s.DeviceGetSerial(d); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("DeviceGetSerial = %v", ret)
	}
	if _, ret := s.SystemGetProcessName(1); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("SystemGetProcessName = %v", ret)
	}
	// Library-level functions taking a handle behave like its method.
	if u, ret := s.DeviceGetUUID(d); ret != nvml.SUCCESS || u == "" {
		t.Errorf("DeviceGetUUID = %q, %v", u, ret)
	}
	if _, ret := s.DeviceGetUUID(nil); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("DeviceGetUUID(nil) = %v", ret)
	}
}

func TestUninitialized(t *testing.T) {
	s, err := New(Options{Profile: "dgx-h100", NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ret := s.DeviceGetCount(); ret != nvml.ERROR_UNINITIALIZED {
		t.Fatalf("DeviceGetCount before Init = %v", ret)
	}
	if ret := s.Shutdown(); ret != nvml.ERROR_UNINITIALIZED {
		t.Fatalf("Shutdown before Init = %v", ret)
	}
	s.Init()
	s.Init()
	d := device(t, s, 0)
	s.Shutdown()
	if _, ret := d.GetUUID(); ret != nvml.SUCCESS {
		t.Fatalf("GetUUID with one Init left = %v", ret)
	}
	s.Shutdown()
	for name, ret := range map[string]nvml.Return{
		"GetUUID":                second(d.GetUUID()),
		"DeviceGetHandleByIndex": second(s.DeviceGetHandleByIndex(0)),
	} {
		if ret != nvml.ERROR_UNINITIALIZED {
			t.Errorf("%s after the last Shutdown = %v", name, ret)
		}
	}
	// ErrorString reports no status, so it answers anyway.
	if got := s.ErrorString(nvml.ERROR_NOT_FOUND); got != "ERROR_NOT_FOUND" {
		t.Errorf("ErrorString = %q", got)
	}
	if s.Extensions() == nil {
		t.Error("Extensions() = nil")
	}
}

func second[A any](_ A, r nvml.Return) nvml.Return { return r }
