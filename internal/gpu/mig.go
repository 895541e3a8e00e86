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

package gpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MIG is what a MIG-capable GPU offers and holds: its GPU instance
// profiles with their placements, and the GPU instances that exist now.
type MIG struct {
	// MemorySlices is the number of memory slices placements are counted
	// in (8 on A100, H100, H200, B200).
	MemorySlices int
	// ComputeSlices is the number of compute slices the GPU instances of
	// the GPU can hold together (7 on the same GPUs).
	ComputeSlices int
	// ModeChangeNeedsReset is true where turning MIG mode on or off takes a
	// GPU reset (Ampere). Hopper and later switch at once.
	ModeChangeNeedsReset bool
	// Profiles in NVML profile index order.
	Profiles []MigProfile
	// Instances are the GPU instances that exist (MIG mode on), whoever
	// created them, in GPU instance ID order.
	Instances []MigInstance
}

// MigProfile is one GPU instance profile.
type MigProfile struct {
	// Name as nvidia-smi spells it: "1g.10gb", "1g.10gb+me".
	Name string
	// ID is NVML's GPU instance profile ID (19 for 1g on H100), the value
	// the create calls take; Index is the NVML_GPU_INSTANCE_PROFILE_*
	// value GetGpuInstanceProfileInfo takes.
	ID    uint32
	Index int
	// ComputeSlices is the profile's share of the GPU's compute slices.
	ComputeSlices int
	// InstanceCount is how many instances of the profile one GPU holds at
	// most; it can be fewer than there are placements (1g.10gb+me: one).
	InstanceCount   int
	MemoryBytes     uint64
	Multiprocessors int
	CopyEngines     int
	Decoders        int
	Encoders        int
	JPEGEngines     int
	OFAEngines      int
	// Placements are where an instance of the profile may be created, in
	// memory slices.
	Placements []MigPlacement
}

// MigPlacement is a range of memory slices.
type MigPlacement struct {
	Start int
	Size  int
}

// Overlaps reports whether p and q share a memory slice.
func (p MigPlacement) Overlaps(q MigPlacement) bool {
	return p.Start < q.Start+q.Size && q.Start < p.Start+p.Size
}

// MigInstance is a GPU instance that exists on a GPU.
type MigInstance struct {
	// GIID is the GPU instance ID.
	GIID int
	// ProfileID is the GPU instance profile ID.
	ProfileID uint32
	Placement MigPlacement
	// ComputeInstances are the IDs of its compute instances.
	ComputeInstances []int
}

// ProfileByName returns the profile with the given name.
func (m *MIG) ProfileByName(name string) (MigProfile, bool) {
	for _, p := range m.Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return MigProfile{}, false
}

// ProfileByID returns the profile with the given NVML profile ID.
func (m *MIG) ProfileByID(id uint32) (MigProfile, bool) {
	for _, p := range m.Profiles {
		if p.ID == id {
			return p, true
		}
	}
	return MigProfile{}, false
}

// MigMemoryGB is the memory size in a MIG profile name ("10" in 1g.10gb),
// computed as nvidia-smi and NVIDIA's go-nvlib do: the profile's share of
// the GPU's memory rounded up to whole memory slices, times the GPU's
// memory in whole GiB. The driver keeps a little of each slice for itself,
// so a share just under a slice boundary (4864 of 40960 MiB on an A100) is
// a full slice; a share a few percent over one (mock tables that round
// sizes up) is not taken for the next.
func MigMemoryGB(profileMiB, totalBytes uint64, memorySlices int) int {
	if totalBytes == 0 || memorySlices == 0 {
		return int((profileMiB + 1023) / 1024)
	}
	const gib = 1 << 30
	share := float64(profileMiB<<20) / float64(totalBytes) * float64(memorySlices)
	slices := math.Ceil(share - 0.05)
	totalGB := float64((totalBytes + gib - 1) / gib)
	return int(math.Round(slices / float64(memorySlices) * totalGB))
}

// MigProfileName is "<compute slices>g.<memory GB>gb" plus the suffix of
// the profile variant ("+me", "-me", "+me.all", "+gfx").
func MigProfileName(computeSlices, memoryGB int, suffix string) string {
	return fmt.Sprintf("%dg.%dgb%s", computeSlices, memoryGB, suffix)
}

// MigProfileToken is a profile name as it appears in device names and
// counter names, which must be DNS labels: dots and "+" dropped, a "-"
// (a variant without something) spelled "no": 1g.10gb → 1g10gb,
// 1g.10gb+me → 1g10gbme, 1g.10gb-me → 1g10gbnome, 1g.10gb+me.all →
// 1g10gbmeall.
func MigProfileToken(profile string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(profile) {
		switch {
		case r == '-':
			b.WriteString("no")
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// MigDeviceName returns "gpu-<minor>-mig-<profile token>-<placement start>",
// e.g. gpu-0-mig-1g10gb-3.
func MigDeviceName(minor int, profile string, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", minor, MigProfileToken(profile), start)
}

// ParsedDeviceName is what a device name says.
type ParsedDeviceName struct {
	Minor int
	// MIG is false for a whole GPU.
	MIG bool
	// Monitor is true for the GPU's monitoring device.
	Monitor bool
	// ProfileToken and Start name the MIG placement.
	ProfileToken string
	Start        int
}

// ParseDeviceName parses gpu-<minor>, gpu-<minor>-monitor and
// gpu-<minor>-mig-<token>-<start>.
func ParseDeviceName(name string) (ParsedDeviceName, bool) {
	rest, ok := strings.CutPrefix(name, "gpu-")
	if !ok {
		return ParsedDeviceName{}, false
	}
	if minorStr, ok := strings.CutSuffix(rest, "-monitor"); ok {
		minor, err := strconv.Atoi(minorStr)
		if err != nil || minor < 0 || strconv.Itoa(minor) != minorStr {
			return ParsedDeviceName{}, false
		}
		return ParsedDeviceName{Minor: minor, Monitor: true}, true
	}
	minorStr, mig, isMIG := strings.Cut(rest, "-mig-")
	minor, err := strconv.Atoi(minorStr)
	if err != nil || minor < 0 || strconv.Itoa(minor) != minorStr {
		return ParsedDeviceName{}, false
	}
	if !isMIG {
		return ParsedDeviceName{Minor: minor}, true
	}
	i := strings.LastIndex(mig, "-")
	if i <= 0 {
		return ParsedDeviceName{}, false
	}
	start, err := strconv.Atoi(mig[i+1:])
	if err != nil || start < 0 || strconv.Itoa(start) != mig[i+1:] {
		return ParsedDeviceName{}, false
	}
	return ParsedDeviceName{Minor: minor, MIG: true, ProfileToken: mig[:i], Start: start}, true
}

// MigDevice is one MIG placement as published: a GPU, a profile and where.
type MigDevice struct {
	Parent    GPU
	Profile   MigProfile
	Placement MigPlacement
}

// Name is the published device name.
func (d MigDevice) Name() string {
	return MigDeviceName(d.Parent.Minor, d.Profile.Name, d.Placement.Start)
}

// MigDeviceByName resolves a published MIG device name on the node.
func (n Node) MigDeviceByName(name string) (MigDevice, bool) {
	p, ok := ParseDeviceName(name)
	if !ok || !p.MIG {
		return MigDevice{}, false
	}
	for _, g := range n.GPUs {
		if g.Minor != p.Minor || g.MIG == nil {
			continue
		}
		for _, prof := range g.MIG.Profiles {
			if MigProfileToken(prof.Name) != p.ProfileToken {
				continue
			}
			for _, pl := range prof.Placements {
				if pl.Start == p.Start {
					return MigDevice{Parent: g, Profile: prof, Placement: pl}, true
				}
			}
		}
	}
	return MigDevice{}, false
}

// ComputeLimitBinds reports whether the GPU's compute slices limit what
// it holds beyond what its memory slices and instance counts already do:
// whether some set of instances, no two sharing a memory slice and at most
// InstanceCount of each profile, takes more than ComputeSlices compute
// slices. On every GPU gpudra knows (A100, H100, H200, B200) none does:
// a placement never takes more compute slices than memory slices, and the
// placements that reach the eighth memory slice take fewer. Where it
// returns false, counters for the memory slices and the instance counts
// accept exactly what the hardware accepts.
func (m *MIG) ComputeLimitBinds() bool {
	counts := make([]int, len(m.Profiles))
	var binds func(pos, compute int) bool
	binds = func(pos, compute int) bool {
		if compute > m.ComputeSlices {
			return true
		}
		if pos >= m.MemorySlices {
			return false
		}
		if binds(pos+1, compute) {
			return true
		}
		for i, p := range m.Profiles {
			if counts[i] >= p.InstanceCount {
				continue
			}
			for _, pl := range p.Placements {
				if pl.Start != pos {
					continue
				}
				counts[i]++
				b := binds(pos+pl.Size, compute+p.ComputeSlices)
				counts[i]--
				if b {
					return true
				}
			}
		}
		return false
	}
	return binds(0, 0)
}

// LimitedProfiles are the profiles of which the GPU holds fewer instances
// than they have placements (1g.10gb+me: one of seven): each gets a
// counter of its own so that the scheduler cannot place more.
func (m *MIG) LimitedProfiles() []MigProfile {
	var out []MigProfile
	for _, p := range m.Profiles {
		if p.InstanceCount < len(p.Placements) {
			out = append(out, p)
		}
	}
	return out
}
