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
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// migTable is what a MIG-capable model offers: its GPU instance profiles,
// where each may be placed, and the compute instance profiles inside each.
type migTable struct {
	// memorySlices is the number of memory slices placements are counted
	// in (8 on A100, H100, H200 and B200).
	memorySlices uint32
	// computeSlices is the number of compute slices the GPU instances of
	// one GPU can hold together (7 on the same GPUs).
	computeSlices uint32
	// profiles in NVML_GPU_INSTANCE_PROFILE_* index order.
	profiles []giProfile
}

// giProfile is one GPU instance profile.
type giProfile struct {
	// index is the NVML_GPU_INSTANCE_PROFILE_* value that
	// GetGpuInstanceProfileInfo takes.
	index int
	// info.Id is the profile ID that every other call takes. On real
	// hardware it differs from index (1g.10gb on H100: index 0, ID 19), and
	// code that mixes them up must fail here as it would there.
	info       nvml.GpuInstanceProfileInfo
	placements []nvml.GpuInstancePlacement
	// computeProfiles by NVML_COMPUTE_INSTANCE_PROFILE_* index (which is
	// also the compute instance profile ID).
	computeProfiles map[int]ciProfile
}

// ciProfile is one compute instance profile inside a GPU instance profile.
type ciProfile struct {
	info       nvml.ComputeInstanceProfileInfo
	placements []nvml.ComputeInstancePlacement
}

// realGIProfileIDs maps the NVML_GPU_INSTANCE_PROFILE_* index to the ID
// that A100, H100, H200 and B200 report (nvidia-smi mig -lgip, "ID").
var realGIProfileIDs = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      19,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20, // 1g+me
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15, // 1g with two memory slices
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      14,
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      9,
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      5,
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      0,
}

// realGIPlacements are the placements of an 8-memory-slice GPU
// (nvidia-smi mig -lgipp, the same on A100, H100, H200 and B200): start
// and size in memory slices. The go-nvml mocks get Hopper and Blackwell
// wrong (7 slices, 3g of size 3), which hides overlap bugs that real
// hardware exposes.
var realGIPlacements = map[int][]nvml.GpuInstancePlacement{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      spread(0, 1, 1, 7),
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: spread(0, 1, 1, 7),
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: spread(0, 2, 2, 4),
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      spread(0, 2, 2, 3),
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      spread(0, 4, 4, 2),
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      spread(0, 4, 4, 1),
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      spread(0, 8, 8, 1),
}

// realCIStarts are the compute instance placements inside a GPU instance
// with the given number of compute slices, by compute instance size:
// start offsets in compute slices (nvidia-smi mig -lcipp).
var realCIStarts = map[uint32]map[uint32][]uint32{
	1: {1: {0}},
	2: {1: {0, 1}, 2: {0}},
	3: {1: {0, 1, 2}, 2: {0}, 3: {0}},
	4: {1: {0, 1, 2, 3}, 2: {0, 2}, 4: {0}},
	7: {1: {0, 1, 2, 3, 4, 5, 6}, 2: {0, 2, 4}, 3: {0, 4}, 4: {0}, 7: {0}},
}

// ciProfileIndex maps a compute instance size to its
// NVML_COMPUTE_INSTANCE_PROFILE_* index.
var ciProfileIndex = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
}

// spread returns n placements of the given size, starting at first and
// step apart.
func spread(first, size, step uint32, n int) []nvml.GpuInstancePlacement {
	out := make([]nvml.GpuInstancePlacement, n)
	for i := range out {
		out[i] = nvml.GpuInstancePlacement{Start: first + uint32(i)*step, Size: size}
	}
	return out
}

// giSpec is one row of nvidia-smi mig -lgip: a GPU instance profile's
// memory and engines. Its ID, placements and instance count follow from
// the profile index (realGIProfileIDs, realGIPlacements).
type giSpec struct {
	// index is the NVML_GPU_INSTANCE_PROFILE_* value.
	index int
	// memoryMiB is the GPU instance's memory (lgip's GiB column × 1024).
	memoryMiB uint64
	// sms, and the decoder, encoder, copy, JPEG and OFA engine counts.
	sms, dec, enc, ce, jpeg, ofa uint32
}

// sliceCounts are the compute slices of each profile index.
var sliceCounts = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      1,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 1,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 1,
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      2,
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      3,
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      4,
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      7,
}

// instanceLimits are the profiles of which a GPU holds fewer instances
// than they have placements (lgip "Instances Total"): one +me instance.
var instanceLimits = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 1,
}

// newMIGTable builds a model's table from its lgip rows, with the real
// profile IDs, placements (lgipp) and compute instance profiles.
func newMIGTable(specs []giSpec) *migTable {
	t := &migTable{memorySlices: 8, computeSlices: 7}
	for _, s := range specs {
		slices := sliceCounts[s.index]
		p := giProfile{
			index:           s.index,
			placements:      realGIPlacements[s.index],
			computeProfiles: map[int]ciProfile{},
		}
		count := uint32(len(p.placements))
		if limit, ok := instanceLimits[s.index]; ok {
			count = min(count, limit)
		}
		p.info = nvml.GpuInstanceProfileInfo{
			Id:                  realGIProfileIDs[s.index],
			SliceCount:          slices,
			InstanceCount:       count,
			MultiprocessorCount: s.sms,
			CopyEngineCount:     s.ce,
			DecoderCount:        s.dec,
			EncoderCount:        s.enc,
			JpegCount:           s.jpeg,
			OfaCount:            s.ofa,
			MemorySizeMB:        s.memoryMiB,
		}
		info := p.info
		smPerSlice := info.MultiprocessorCount / info.SliceCount
		for size, starts := range realCIStarts[info.SliceCount] {
			ciIndex := ciProfileIndex[size]
			// A compute instance spanning the GPU instance has all of
			// its SMs; a smaller one its share.
			sms := smPerSlice * size
			if size == info.SliceCount {
				sms = info.MultiprocessorCount
			}
			ci := ciProfile{info: nvml.ComputeInstanceProfileInfo{
				Id:                    uint32(ciIndex),
				SliceCount:            size,
				InstanceCount:         uint32(len(starts)),
				MultiprocessorCount:   sms,
				SharedCopyEngineCount: info.CopyEngineCount,
				SharedDecoderCount:    info.DecoderCount,
				SharedEncoderCount:    info.EncoderCount,
				SharedJpegCount:       info.JpegCount,
				SharedOfaCount:        info.OfaCount,
			}}
			for _, st := range starts {
				ci.placements = append(ci.placements, nvml.ComputeInstancePlacement{Start: st, Size: size})
			}
			p.computeProfiles[ciIndex] = ci
		}
		t.profiles = append(t.profiles, p)
	}
	sort.Slice(t.profiles, func(i, j int) bool { return t.profiles[i].index < t.profiles[j].index })
	return t
}

// byIndex returns the profile GetGpuInstanceProfileInfo(index) describes.
func (t *migTable) byIndex(index int) (*giProfile, bool) {
	for i := range t.profiles {
		if t.profiles[i].index == index {
			return &t.profiles[i], true
		}
	}
	return nil, false
}

// byID returns the profile with the given profile ID.
func (t *migTable) byID(id uint32) (*giProfile, bool) {
	for i := range t.profiles {
		if t.profiles[i].info.Id == id {
			return &t.profiles[i], true
		}
	}
	return nil, false
}

// hasPlacement reports whether pl is one of the profile's placements.
func (p *giProfile) hasPlacement(pl nvml.GpuInstancePlacement) bool {
	for _, q := range p.placements {
		if q == pl {
			return true
		}
	}
	return false
}

// computeByID returns the compute instance profile with the given ID.
func (p *giProfile) computeByID(id uint32) (*ciProfile, bool) {
	ci, ok := p.computeProfiles[int(id)]
	if !ok {
		return nil, false
	}
	return &ci, true
}

// hasPlacement reports whether pl is one of the profile's placements.
func (c *ciProfile) hasPlacement(pl nvml.ComputeInstancePlacement) bool {
	for _, q := range c.placements {
		if q == pl {
			return true
		}
	}
	return false
}
