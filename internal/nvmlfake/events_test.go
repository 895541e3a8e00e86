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
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func register(t *testing.T, lib nvml.Interface, devs ...nvml.Device) nvml.EventSet {
	t.Helper()
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for _, d := range devs {
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			t.Fatalf("RegisterEvents: %v", ret)
		}
	}
	t.Cleanup(func() { set.Free() })
	return set
}

func TestInjectedXIDReachesWait(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-h100", "n", dir)
	d3, d4 := device(t, s, 3), device(t, s, 4)
	u3, _ := d3.GetUUID()
	u4, _ := d4.GetUUID()
	if err := InjectXID(dir, u3, 13); err != nil { // before registration: not recorded
		t.Fatal(err)
	}
	set := register(t, s, d3)

	if _, ret := set.Wait(50); ret != nvml.ERROR_TIMEOUT {
		t.Fatalf("Wait with nothing new = %v, want ERROR_TIMEOUT", ret)
	}
	InjectXID(dir, u4, 48) // GPU 4 is not registered
	go func() {
		time.Sleep(100 * time.Millisecond)
		InjectXID(dir, u3, 79)
	}()
	began := time.Now()
	ev, ret := set.Wait(5000)
	if ret != nvml.SUCCESS {
		t.Fatalf("Wait = %v", ret)
	}
	if ev.Device != d3 || ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != 79 || ev.GpuInstanceId != noInstance {
		t.Errorf("event %+v", ev)
	}
	if time.Since(began) > 2*time.Second {
		t.Errorf("Wait took %v", time.Since(began))
	}
	if ev, ret := s.EventSetWait(set, 50); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("second Wait = %+v, %v; want ERROR_TIMEOUT", ev, ret)
	}
}

func TestMIGXIDNamesTheInstance(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-h100", "n", dir)
	d := device(t, s, 0)
	enableMIG(t, d)
	makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	makeMIGDevice(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 1)
	mig, _ := d.GetMigDeviceHandleByIndex(1)
	uuid, _ := mig.GetUUID()
	set := register(t, s, d)
	InjectXID(dir, uuid, 94)
	ev, ret := set.Wait(2000)
	if ret != nvml.SUCCESS || ev.Device != d || ev.GpuInstanceId != 1 || ev.ComputeInstanceId != 0 || ev.EventData != 94 {
		t.Fatalf("event %+v, %v", ev, ret)
	}
}

func TestInjectWithoutStateDir(t *testing.T) {
	s := start(t, "mixed", "n", "")
	d := device(t, s, 8)
	uuid, _ := d.GetUUID()
	set := register(t, s, d)
	if err := s.InjectXID(uuid, 31); err != nil {
		t.Fatal(err)
	}
	if ev, ret := set.Wait(1000); ret != nvml.SUCCESS || ev.EventData != 31 {
		t.Fatalf("event %+v, %v", ev, ret)
	}
	if err := s.InjectXID("not-a-uuid", 1); err == nil {
		t.Error("InjectXID accepted a malformed UUID")
	}
	if err := InjectXID("", uuid, 1); err == nil {
		t.Error("InjectXID without a state directory succeeded")
	}
}

func TestRegisterEvents(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	set, _ := s.EventSetCreate()
	if types, _ := d.GetSupportedEventTypes(); types&nvml.EventTypeXidCriticalError == 0 {
		t.Errorf("supported events %x lack XIDs", types)
	}
	if ret := d.RegisterEvents(nvml.EventTypePState, set); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("RegisterEvents(PState) = %v", ret)
	}
	if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, nil); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("RegisterEvents(nil set) = %v", ret)
	}
	set.Free()
	if _, ret := set.Wait(1); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("Wait on a freed set = %v", ret)
	}
}

// nvmlEventTypeGpuRecoveryAction came with R565 (NVML change log,
// "Changes between v560 and v565"): an R550 GPU neither offers nor
// accepts it, an R580 one does, and delivers it, without data, when an
// XID raises the recovery action and when a reset clears it, after the
// state change, so that reading the field on the event finds the new
// action.
func TestRecoveryActionEvents(t *testing.T) {
	old := start(t, "dgx-h100", "n", t.TempDir()) // driver 550.54.15
	d := device(t, old, 0)
	if types, _ := d.GetSupportedEventTypes(); types&nvml.EventTypeGpuRecoveryAction != 0 {
		t.Errorf("R550 supports recovery-action events (%#x)", types)
	}
	set, _ := old.EventSetCreate()
	if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeGpuRecoveryAction, set); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("R550 registers recovery-action events: %v", ret)
	}
	set.Free()

	dir := t.TempDir()
	s := start(t, "gb200-tray", "n", dir) // driver 580.173.02
	d = device(t, s, 1)
	uuid, _ := d.GetUUID()
	types, _ := d.GetSupportedEventTypes()
	if types&nvml.EventTypeGpuRecoveryAction == 0 {
		t.Fatalf("R580 does not support recovery-action events (%#x)", types)
	}
	set, _ = s.EventSetCreate()
	t.Cleanup(func() { set.Free() })
	if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeGpuRecoveryAction, set); ret != nvml.SUCCESS {
		t.Fatalf("RegisterEvents: %v", ret)
	}
	action := func() nvml.DeviceGpuRecoveryAction {
		v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
		if ret := d.GetFieldValues(v); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		return nvml.DeviceGpuRecoveryAction(v[0].Value[0])
	}
	next := func() nvml.EventData {
		t.Helper()
		ev, ret := set.Wait(5000)
		if ret != nvml.SUCCESS {
			t.Fatalf("Wait = %v", ret)
		}
		return ev
	}
	recoveryEvent := nvml.EventData{Device: d, EventType: nvml.EventTypeGpuRecoveryAction, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}

	// An application's XID asks for nothing: no recovery-action event.
	if err := InjectXID(dir, uuid, 13); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != 13 {
		t.Errorf("event %+v, want XID 13", ev)
	}
	if err := InjectXID(dir, uuid, 48); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != 48 {
		t.Errorf("event %+v, want XID 48", ev)
	}
	if ev := next(); ev != recoveryEvent {
		t.Errorf("event %+v, want %+v", ev, recoveryEvent)
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_GPU_RESET {
		t.Errorf("action after XID 48 = %d, want GPU_RESET", a)
	}
	// A second XID that asks for no more changes nothing.
	if err := InjectXID(dir, uuid, 48); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.EventType != nvml.EventTypeXidCriticalError {
		t.Errorf("event %+v, want XID 48", ev)
	}
	if ev, ret := set.Wait(100); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("an unchanged action was reported: %+v, %v", ev, ret)
	}
	// The reset is the driver's all-clear.
	if err := ResetGPU(dir, uuid); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev != recoveryEvent {
		t.Errorf("event %+v after the reset, want %+v", ev, recoveryEvent)
	}
	if a := action(); a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Errorf("action after the reset = %d, want NONE", a)
	}
	// A reset with nothing pending changes nothing.
	if err := ResetGPU(dir, uuid); err != nil {
		t.Fatal(err)
	}
	if ev, ret := set.Wait(100); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("a reset of a fit GPU was reported: %+v, %v", ev, ret)
	}
}
