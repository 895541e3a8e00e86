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

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestLostGPU: a GPU that fell off the bus answers ERROR_GPU_IS_LOST to
// every call, in every process over the state directory and after a
// restart, reports XID 79 first, cannot be reset, and is back (without its
// MIG instances) after a reboot. The other GPUs are untouched.
func TestLostGPU(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-h100", "n", dir)
	d1 := device(t, s, 1)
	u1, _ := d1.GetUUID()
	enableMIG(t, d1)
	gi := createGI(t, d1, profileInfo(t, d1, nvml.GPU_INSTANCE_PROFILE_1_SLICE), &nvml.GpuInstancePlacement{Start: 0, Size: 1})
	set := register(t, s, d1)

	if err := LoseGPU(dir, u1); err != nil {
		t.Fatal(err)
	}
	ev, ret := set.Wait(5000)
	if ret != nvml.SUCCESS || ev.Device != d1 || ev.EventData != 79 {
		t.Errorf("event after the loss = %+v, %v; want XID 79 on GPU 1", ev, ret)
	}

	// A second process, or the plugin after a restart.
	other := start(t, "dgx-h100", "n", dir)
	for name, lib := range map[string]*Server{"same process": s, "another process": other} {
		if n, ret := lib.DeviceGetCount(); ret != nvml.SUCCESS || n != 8 {
			t.Errorf("%s: DeviceGetCount = %d, %v; want 8 (a lost GPU is still counted)", name, n, ret)
		}
		if _, ret := lib.DeviceGetHandleByIndex(1); ret != nvml.ERROR_GPU_IS_LOST {
			t.Errorf("%s: DeviceGetHandleByIndex(1) = %v, want ERROR_GPU_IS_LOST", name, ret)
		}
		if _, ret := lib.DeviceGetHandleByUUID(u1); ret != nvml.ERROR_GPU_IS_LOST {
			t.Errorf("%s: DeviceGetHandleByUUID(lost) = %v, want ERROR_GPU_IS_LOST", name, ret)
		}
		if d, ret := lib.DeviceGetHandleByIndex(2); ret != nvml.SUCCESS {
			t.Errorf("%s: GPU 2: %v", name, ret)
		} else if _, _, ret := d.GetMigMode(); ret != nvml.SUCCESS {
			t.Errorf("%s: GPU 2 GetMigMode = %v", name, ret)
		}
	}
	// Handles taken before the loss fail too.
	if _, _, ret := d1.GetMigMode(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GetMigMode on the lost GPU = %v", ret)
	}
	if _, ret := d1.GetUUID(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GetUUID on the lost GPU = %v", ret)
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("Destroy of a GPU instance on the lost GPU = %v", ret)
	}
	if err := ResetGPU(dir, u1); err == nil {
		t.Error("a lost GPU was reset")
	}

	if err := Reboot(dir); err != nil {
		t.Fatal(err)
	}
	back := start(t, "dgx-h100", "n", dir)
	d := device(t, back, 1)
	if u, ret := d.GetUUID(); ret != nvml.SUCCESS || u != u1 {
		t.Fatalf("GPU 1 after reboot: %q, %v", u, ret)
	}
	if n, ret := d.GetMaxMigDeviceCount(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	} else {
		for i := range n {
			if _, ret := d.GetMigDeviceHandleByIndex(i); ret == nvml.SUCCESS {
				t.Errorf("MIG device %d survived the reboot", i)
			}
		}
	}
}

// TestXID79LosesTheGPU: XID 79 is the driver reporting that the GPU fell
// off the bus, so an injected XID 79 is a lost GPU, as on real hardware:
// from then on, for every process over the state directory, the GPU
// answers ERROR_GPU_IS_LOST until a reboot. (Before, the fake went on
// answering for it, and a restarted plugin published it as fit.)
func TestXID79LosesTheGPU(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-a100", "n", dir)
	u2, _ := device(t, s, 2).GetUUID()
	if err := InjectXID(dir, u2, 79); err != nil {
		t.Fatal(err)
	}
	other := start(t, "dgx-a100", "n", dir)
	if _, ret := other.DeviceGetHandleByUUID(u2); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("after XID 79, DeviceGetHandleByUUID = %v, want ERROR_GPU_IS_LOST", ret)
	}
	if err := Reboot(dir); err != nil {
		t.Fatal(err)
	}
	if _, ret := other.DeviceGetHandleByUUID(u2); ret != nvml.SUCCESS {
		t.Errorf("after a reboot: %v", ret)
	}
}

// TestXID79LossComesBeforeTheEvent: real hardware has already fallen off
// the bus when the driver reports XID 79 (NVIDIA, "XID Errors",
// https://docs.nvidia.com/deploy/xid-errors/), so whoever receives the
// event and then reads the GPU finds it lost. The test holds back the
// state change (the state directory's lock, or an in-memory store's
// mutex) while the XID is injected: no event may be delivered until the
// loss is recorded. Before, the fake appended the event first, and the
// kubelet plugin's recheck could read the GPU as fit and clear the taint
// it had just set.
func TestXID79LossComesBeforeTheEvent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stateDir bool
	}{{"state directory", true}, {"in memory", false}} {
		for _, how := range []string{"InjectXID", "LoseGPU"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				dir := ""
				if tc.stateDir {
					dir = t.TempDir()
				}
				s := start(t, "dgx-h100", "n", dir)
				d := device(t, s, 5)
				u, _ := d.GetUUID()
				set := register(t, s, d)

				var release func()
				if dir != "" {
					unlock, err := lockDir(dir)
					if err != nil {
						t.Fatal(err)
					}
					release = unlock
				} else {
					s.store.mu.Lock()
					release = s.store.mu.Unlock
				}
				done := make(chan error, 1)
				go func() {
					if how == "LoseGPU" {
						done <- s.LoseGPU(u)
					} else {
						done <- s.InjectXID(u, 79)
					}
				}()
				ev, ret := set.Wait(300)
				release()
				if ret == nvml.SUCCESS {
					t.Fatalf("XID %d delivered while the GPU's loss was still held back: the event came before the state change", ev.EventData)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				ev, ret = set.Wait(5000)
				if ret != nvml.SUCCESS || ev.EventData != 79 {
					t.Fatalf("event = %+v, %v; want XID 79", ev, ret)
				}
				if _, ret := d.GetUUID(); ret != nvml.ERROR_GPU_IS_LOST {
					t.Errorf("on the XID 79 event, GetUUID = %v, want ERROR_GPU_IS_LOST", ret)
				}
				if _, ret := s.DeviceGetHandleByUUID(u); ret != nvml.ERROR_GPU_IS_LOST {
					t.Errorf("on the XID 79 event, DeviceGetHandleByUUID = %v, want ERROR_GPU_IS_LOST", ret)
				}
			})
		}
	}
}
