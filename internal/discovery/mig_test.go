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

package discovery

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestMigProfiles pins, per MIG-capable model, the profile names (as
// nvidia-smi spells them) and their placements: the names become device
// names, the placements counters.
func TestMigProfiles(t *testing.T) {
	tests := []struct {
		profile string
		want    string
	}{
		{"dgx-a100", "1g.5gb@0-6 2g.10gb@0,2,4 3g.20gb@0,4 4g.20gb@0 7g.40gb@0 1g.5gb+me@0-6 1g.10gb@0,2,4,6"},
		{"dgx-h100", "1g.10gb@0-6 2g.20gb@0,2,4 3g.40gb@0,4 4g.40gb@0 7g.80gb@0 1g.10gb+me@0-6 1g.20gb@0,2,4,6"},
		{"dgx-h200", "1g.18gb@0-6 2g.35gb@0,2,4 3g.71gb@0,4 4g.71gb@0 7g.141gb@0 1g.18gb+me@0-6 1g.35gb@0,2,4,6"},
		{"dgx-b200", "1g.23gb@0-6 2g.45gb@0,2,4 3g.90gb@0,4 4g.90gb@0 7g.180gb@0 1g.23gb+me@0-6 1g.45gb@0,2,4,6"},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			s, err := nvmlfake.New(nvmlfake.Options{Profile: tc.profile, NodeName: "n"})
			if err != nil {
				t.Fatal(err)
			}
			s.Init()
			defer s.Shutdown()
			node, err := Discover(context.Background(), s, "n")
			if err != nil {
				t.Fatal(err)
			}
			m := node.GPUs[0].MIG
			if m == nil || m.MemorySlices != 8 || m.ComputeSlices != 7 {
				t.Fatalf("MIG %+v", m)
			}
			if got := describeProfiles(m); got != tc.want {
				t.Errorf("profiles\n got %s\nwant %s", got, tc.want)
			}
			// The memory slices and instance counts bound what the GPU
			// holds: the slice builder publishes no compute counter.
			if m.ComputeLimitBinds() {
				t.Errorf("ComputeLimitBinds = true: a set of instances that fits the memory slices takes more than %d compute slices", m.ComputeSlices)
			}
			if limited := m.LimitedProfiles(); len(limited) != 1 || !strings.HasSuffix(limited[0].Name, "+me") {
				t.Errorf("limited profiles %v, want the +me one", limited)
			}
			if m.ModeChangeNeedsReset != (tc.profile == "dgx-a100") {
				t.Errorf("ModeChangeNeedsReset = %v", m.ModeChangeNeedsReset)
			}
		})
	}
}

func describeProfiles(m *gpu.MIG) string {
	var parts []string
	for _, p := range m.Profiles {
		var starts []string
		contiguous := len(p.Placements) > 2
		for i, pl := range p.Placements {
			starts = append(starts, fmt.Sprint(pl.Start))
			if i > 0 && pl.Start != p.Placements[i-1].Start+1 {
				contiguous = false
			}
		}
		s := strings.Join(starts, ",")
		if contiguous {
			s = fmt.Sprintf("%d-%d", p.Placements[0].Start, p.Placements[len(p.Placements)-1].Start)
		}
		parts = append(parts, p.Name+"@"+s)
	}
	return strings.Join(parts, " ")
}

// TestMigInstancesDiscovered: with MIG on, discovery lists the GPU and
// compute instances that exist, whoever created them.
func TestMigInstancesDiscovered(t *testing.T) {
	s, err := nvmlfake.New(nvmlfake.Options{Profile: "dgx-h100", NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	defer s.Shutdown()
	d, _ := s.DeviceGetHandleByIndex(1)
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 2, Size: 2})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	node, err := Discover(context.Background(), s, "n")
	if err != nil {
		t.Fatal(err)
	}
	got := node.GPUs[1].MIG.Instances
	want := []gpu.MigInstance{{GIID: 0, ProfileID: 14, Placement: gpu.MigPlacement{Start: 2, Size: 2}, ComputeInstances: []int{0}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("instances %+v, want %+v", got, want)
	}
	if len(node.GPUs[0].MIG.Instances) != 0 {
		t.Errorf("GPU 0 has instances %+v", node.GPUs[0].MIG.Instances)
	}
}
