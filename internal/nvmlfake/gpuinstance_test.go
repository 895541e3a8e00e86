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
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestProfileIDsAreNotIndexes(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	want := map[int]uint32{
		nvml.GPU_INSTANCE_PROFILE_1_SLICE: 19, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20,
		nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15, nvml.GPU_INSTANCE_PROFILE_2_SLICE: 14,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE: 9, nvml.GPU_INSTANCE_PROFILE_4_SLICE: 5, nvml.GPU_INSTANCE_PROFILE_7_SLICE: 0,
	}
	// Profile info is available with MIG off, as NVML documents.
	for index, id := range want {
		if info := profileInfo(t, d, index); info.Id != id {
			t.Errorf("profile index %d has ID %d, want %d", index, info.Id, id)
		}
	}
	if _, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_COUNT); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("profile index out of range: %v", ret)
	}
	if _, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_6_SLICE); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("profile the GPU lacks: %v", ret)
	}
	// Passing an index where an ID belongs is the bug this catches: index
	// 2 (3g) is ID 9; ID 2 is nothing.
	enableMIG(t, d)
	if _, ret := d.CreateGpuInstance(&nvml.GpuInstanceProfileInfo{Id: nvml.GPU_INSTANCE_PROFILE_3_SLICE}); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("CreateGpuInstance with a profile index as ID = %v, want ERROR_INVALID_ARGUMENT", ret)
	}
}

func TestRealPlacements(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	tests := []struct {
		index int
		want  []nvml.GpuInstancePlacement
	}{
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, []nvml.GpuInstancePlacement{{Start: 0, Size: 4}, {Start: 4, Size: 4}}},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, []nvml.GpuInstancePlacement{{Start: 0, Size: 8}}},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, []nvml.GpuInstancePlacement{{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}, {Start: 6, Size: 2}}},
	}
	for _, tc := range tests {
		got, ret := d.GetGpuInstancePossiblePlacements(profileInfo(t, d, tc.index))
		if ret != nvml.SUCCESS || len(got) != len(tc.want) {
			t.Fatalf("placements of profile %d = %v, %v; want %v", tc.index, got, ret, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("placements of profile %d = %v, want %v", tc.index, got, tc.want)
			}
		}
	}
}

// step is one GPU instance creation and what NVML answers.
type step struct {
	index int                        // profile index
	at    *nvml.GpuInstancePlacement // nil: CreateGpuInstance
	ret   nvml.Return
	start uint32 // placement of the result, on success
}

func TestCreateGpuInstance(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		steps   []step
	}{
		{"overlap with an existing instance", "dgx-a100", []step{
			{nvml.GPU_INSTANCE_PROFILE_4_SLICE, placement(0, 4), nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_3_SLICE, placement(0, 4), nvml.ERROR_INSUFFICIENT_RESOURCES, 0},
			{nvml.GPU_INSTANCE_PROFILE_3_SLICE, placement(4, 4), nvml.SUCCESS, 4},
		}},
		{"two full-GPU instances", "dgx-h100", []step{
			{nvml.GPU_INSTANCE_PROFILE_7_SLICE, nil, nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_7_SLICE, nil, nvml.ERROR_INSUFFICIENT_RESOURCES, 0},
		}},
		{"compute slices run out before memory slices", "dgx-a100", []step{
			{nvml.GPU_INSTANCE_PROFILE_4_SLICE, nil, nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_2_SLICE, nil, nvml.SUCCESS, 4},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 6},
			// Memory slice 7 is free, but all 7 compute slices are taken.
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, placement(6, 1), nvml.ERROR_INSUFFICIENT_RESOURCES, 0},
		}},
		{"instance count of a profile", "dgx-h100", []step{
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nil, nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nil, nvml.ERROR_INSUFFICIENT_RESOURCES, 0},
		}},
		{"without placement takes the first free one", "dgx-h100", []step{
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, placement(0, 1), nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, placement(2, 1), nvml.SUCCESS, 2},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 1},
			{nvml.GPU_INSTANCE_PROFILE_2_SLICE, nil, nvml.SUCCESS, 4},
		}},
		{"placement not offered by the profile", "dgx-h100", []step{
			{nvml.GPU_INSTANCE_PROFILE_3_SLICE, placement(1, 4), nvml.ERROR_INVALID_ARGUMENT, 0},
			{nvml.GPU_INSTANCE_PROFILE_3_SLICE, placement(0, 3), nvml.ERROR_INVALID_ARGUMENT, 0},
		}},
		{"seven 1g then no more", "dgx-b200", []step{
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 0},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 1},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 2},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 3},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 4},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 5},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.SUCCESS, 6},
			{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nil, nvml.ERROR_INSUFFICIENT_RESOURCES, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.profile, "n", "")
			d := device(t, s, 0)
			if tc.profile == "dgx-a100" {
				d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
				uuid, _ := d.GetUUID()
				s.store.mutate(func(st *state) error { st.GPUs[uuid].resetGPU(); return nil })
			} else {
				enableMIG(t, d)
			}
			for i, st := range tc.steps {
				info := profileInfo(t, d, st.index)
				var gi nvml.GpuInstance
				var ret nvml.Return
				if st.at == nil {
					gi, ret = d.CreateGpuInstance(info)
				} else {
					gi, ret = d.CreateGpuInstanceWithPlacement(info, st.at)
				}
				if ret != st.ret {
					t.Fatalf("step %d: create profile %d at %v = %v, want %v", i, st.index, st.at, ret, st.ret)
				}
				if ret != nvml.SUCCESS {
					continue
				}
				got := giInfo(t, gi)
				if got.Placement.Start != st.start || got.ProfileId != info.Id || got.Device != d {
					t.Errorf("step %d: created %+v, want start %d, profile %d on the GPU", i, got, st.start, info.Id)
				}
			}
		})
	}
}

func TestCreateNeedsMIG(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	info := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := d.CreateGpuInstance(info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("CreateGpuInstance with MIG off = %v", ret)
	}
	if _, ret := d.GetGpuInstances(info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetGpuInstances with MIG off = %v", ret)
	}
	l4 := device(t, start(t, "mixed", "n", ""), 8)
	if _, ret := l4.GetGpuInstanceProfileInfo(0); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetGpuInstanceProfileInfo on L4 = %v", ret)
	}
	if _, ret := l4.CreateGpuInstance(info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("CreateGpuInstance on L4 = %v", ret)
	}
}

func TestGpuInstanceIDsAndLookups(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	one := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	two := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	a := createGI(t, d, one, nil)
	b := createGI(t, d, one, nil)
	c := createGI(t, d, two, nil)
	for i, gi := range []nvml.GpuInstance{a, b, c} {
		if id := giInfo(t, gi).Id; id != uint32(i) {
			t.Errorf("instance %d has ID %d", i, id)
		}
	}
	if ret := b.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := b.GetInfo(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GetInfo on a destroyed instance = %v", ret)
	}
	if ret := b.Destroy(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("second Destroy = %v", ret)
	}
	reused := createGI(t, d, two, nil)
	if id := giInfo(t, reused).Id; id != 1 {
		t.Errorf("new instance has ID %d, want the freed 1", id)
	}

	ones, ret := d.GetGpuInstances(one)
	if ret != nvml.SUCCESS || len(ones) != 1 || ones[0] != a {
		t.Errorf("GetGpuInstances(1g) = %v, %v; want [a]", ones, ret)
	}
	twos, _ := d.GetGpuInstances(two)
	if len(twos) != 2 {
		t.Errorf("GetGpuInstances(2g) = %d instances, want 2", len(twos))
	}
	if got, ret := d.GetGpuInstanceById(2); ret != nvml.SUCCESS || got != c {
		t.Errorf("GetGpuInstanceById(2) = %v, %v", got, ret)
	}
	if _, ret := d.GetGpuInstanceById(5); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("GetGpuInstanceById(5) = %v, want ERROR_NOT_FOUND", ret)
	}
	// go-nvml sizes the result by InstanceCount; a hand-made info fails.
	if _, ret := d.GetGpuInstances(&nvml.GpuInstanceProfileInfo{Id: one.Id}); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GetGpuInstances without InstanceCount = %v", ret)
	}
	// 1g@0, 2g@2, 2g@4: memory slices 1 and 6 are free for 1g.
	if n, ret := d.GetGpuInstanceRemainingCapacity(one); ret != nvml.SUCCESS || n != 2 {
		t.Errorf("remaining 1g capacity = %d, %v; want 2", n, ret)
	}
}

func TestRemainingCapacity(t *testing.T) {
	s := start(t, "dgx-h100", "n", "")
	d := device(t, s, 0)
	enableMIG(t, d)
	one := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	three := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if n, _ := d.GetGpuInstanceRemainingCapacity(one); n != 7 {
		t.Errorf("empty GPU: 1g capacity %d, want 7", n)
	}
	createGI(t, d, three, placement(4, 4))
	if n, _ := d.GetGpuInstanceRemainingCapacity(one); n != 4 {
		t.Errorf("after 3g@4: 1g capacity %d, want 4", n)
	}
	if n, _ := d.GetGpuInstanceRemainingCapacity(three); n != 1 {
		t.Errorf("after 3g@4: 3g capacity %d, want 1", n)
	}
}

func TestConcurrentCreates(t *testing.T) {
	s := start(t, "dgx-h100", "n", t.TempDir())
	d := device(t, s, 0)
	enableMIG(t, d)
	one := profileInfo(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	var wg sync.WaitGroup
	results := make(chan nvml.Return, 12)
	for range 12 {
		wg.Go(func() {
			_, ret := d.CreateGpuInstance(one)
			results <- ret
		})
	}
	wg.Wait()
	close(results)
	ok := 0
	for ret := range results {
		switch ret {
		case nvml.SUCCESS:
			ok++
		case nvml.ERROR_INSUFFICIENT_RESOURCES:
		default:
			t.Errorf("concurrent create: %v", ret)
		}
	}
	if ok != 7 {
		t.Errorf("%d concurrent 1g creations succeeded, want 7", ok)
	}
}
