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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestSetComputeMode(t *testing.T) {
	tests := []struct {
		name   string
		migOn  bool
		mode   nvml.ComputeMode
		ret    nvml.Return
		result nvml.ComputeMode
	}{
		{"exclusive process, as MPS needs", false, nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, nvml.SUCCESS, nvml.COMPUTEMODE_EXCLUSIVE_PROCESS},
		{"prohibited", false, nvml.COMPUTEMODE_PROHIBITED, nvml.SUCCESS, nvml.COMPUTEMODE_PROHIBITED},
		{"out of range", false, nvml.COMPUTEMODE_COUNT, nvml.ERROR_INVALID_ARGUMENT, nvml.COMPUTEMODE_DEFAULT},
		{"negative", false, -1, nvml.ERROR_INVALID_ARGUMENT, nvml.COMPUTEMODE_DEFAULT},
		{"exclusive process with MIG on is not supported", true, nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, nvml.ERROR_NOT_SUPPORTED, nvml.COMPUTEMODE_DEFAULT},
		{"default with MIG on is fine", true, nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS, nvml.COMPUTEMODE_DEFAULT},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, "dgx-h100", "n", t.TempDir())
			d := device(t, s, 2)
			if tc.migOn {
				enableMIG(t, d)
			}
			if ret := d.SetComputeMode(tc.mode); ret != tc.ret {
				t.Fatalf("SetComputeMode(%d) = %v, want %v", tc.mode, ret, tc.ret)
			}
			if got, ret := d.GetComputeMode(); ret != nvml.SUCCESS || got != tc.result {
				t.Errorf("GetComputeMode = %d, %v; want %d", got, ret, tc.result)
			}
		})
	}
}

// TestComputePolicySurvivesRestartNotReboot: the compute mode and time
// slice are the driver's state: a new process (a restarted plugin) sees
// them, a reset or reboot puts them back to the defaults.
func TestComputePolicySurvivesRestartNotReboot(t *testing.T) {
	dir := t.TempDir()
	s := start(t, "dgx-h100", "n", dir)
	d := device(t, s, 1)
	uuid, _ := d.GetUUID()
	if ret := d.SetComputeMode(nvml.COMPUTEMODE_EXCLUSIVE_PROCESS); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := s.SetTimeSlice(uuid, 3); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	other := start(t, "dgx-h100", "n", dir)
	if m, _ := device(t, other, 1).GetComputeMode(); m != nvml.COMPUTEMODE_EXCLUSIVE_PROCESS {
		t.Errorf("another process sees compute mode %d", m)
	}
	if lvl, _ := other.TimeSlice(uuid); lvl != 3 {
		t.Errorf("another process sees time slice %d", lvl)
	}
	state, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil || !strings.Contains(string(state), `"computeMode": 3`) || !strings.Contains(string(state), `"timeSlice": 3`) {
		t.Errorf("state file lacks the settings (%v):\n%s", err, state)
	}
	if err := ResetGPU(dir, uuid); err != nil {
		t.Fatal(err)
	}
	if m, _ := d.GetComputeMode(); m != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("compute mode after a GPU reset = %d, want DEFAULT", m)
	}
	if lvl, _ := s.TimeSlice(uuid); lvl != 0 {
		t.Errorf("time slice after a GPU reset = %d, want 0", lvl)
	}
}

func TestSetTimeSlice(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	uuid, _ := device(t, s, 0).GetUUID()
	for level := range 4 {
		if ret := s.SetTimeSlice(uuid, level); ret != nvml.SUCCESS {
			t.Errorf("SetTimeSlice(%d) = %v", level, ret)
		}
		if got, _ := s.TimeSlice(uuid); got != level {
			t.Errorf("TimeSlice = %d after setting %d", got, level)
		}
	}
	if ret := s.SetTimeSlice(uuid, 4); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("SetTimeSlice(4) = %v, want ERROR_INVALID_ARGUMENT", ret)
	}
	if ret := s.SetTimeSlice("GPU-nope", 1); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("SetTimeSlice on an unknown GPU = %v, want ERROR_NOT_FOUND", ret)
	}
	s.Shutdown()
	if ret := s.SetTimeSlice(uuid, 1); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("SetTimeSlice after Shutdown = %v, want ERROR_UNINITIALIZED", ret)
	}
	s.Init()
}
