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
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// profileCalibration is one testdata/calibration/profiles/<profile>.yaml
// file: public evidence of a system's PCIe and NUMA layout and NVLink
// topology (nvidia-smi, nvidia-smi topo -m), each fact with its source.
type profileCalibration struct {
	Profile        string               `json:"profile"`
	Sources        map[string]source    `json:"sources"`
	BusIDs         layoutFact[[]string] `json:"busIDs"`
	NUMANodes      layoutFact[[]int]    `json:"numaNodes"`
	PCIeRootGroups layoutFact[[][]int]  `json:"pcieRootGroups"`
	NVLinkIslands  layoutFact[[][]int]  `json:"nvlinkIslands"`
	Note           string               `json:"note"`
}

// layoutFact is a fact with its source and, where no source states it,
// the reasoning that infers it.
type layoutFact[T any] struct {
	Value    T      `json:"value"`
	Source   string `json:"source"`
	Inferred string `json:"inferred"`
}

// TestProfileCalibration: every built-in profile that places its GPUs in
// a real system's PCIe tree has a fixture, and the fake's NVML bus IDs,
// NUMA nodes, PCIe root complexes (which GPUs share one) and NVLink
// islands are what the fixture's sources say.
func TestProfileCalibration(t *testing.T) {
	for _, name := range Profiles() {
		placed := false
		for _, g := range builtinProfiles[name].GPUs {
			placed = placed || g.PCI != nil
		}
		path := filepath.Join("testdata", "calibration", "profiles", name+".yaml")
		data, err := os.ReadFile(path)
		if !placed {
			if err == nil {
				t.Errorf("%s: a fixture for a profile with the synthetic PCIe layout", path)
			}
			continue
		}
		if err != nil {
			t.Errorf("profile %s places its GPUs like a real system but has no fixture: %v", name, err)
			continue
		}
		var c profileCalibration
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Run(name, func(t *testing.T) { checkProfileCalibration(t, name, c) })
	}
}

func checkProfileCalibration(t *testing.T, name string, c profileCalibration) {
	if c.Profile != name {
		t.Errorf("fixture names profile %q", c.Profile)
	}
	for id, s := range c.Sources {
		if !refPattern.MatchString(s.Ref) || s.Says == "" {
			t.Errorf("source %s: ref %q must be a URL, owner/repo@commit:path or code-index:<id>, with says", id, s.Ref)
		}
	}
	for field, src := range map[string]string{"busIDs": c.BusIDs.Source, "numaNodes": c.NUMANodes.Source, "pcieRootGroups": c.PCIeRootGroups.Source, "nvlinkIslands": c.NVLinkIslands.Source} {
		if _, ok := c.Sources[src]; !ok {
			t.Errorf("%s: source %q is not among the sources", field, src)
		}
	}
	s := start(t, name, "n", "")
	slots := s.PCIeSlots()
	var bus []string
	var numa []int
	roots := map[string][]int{}
	islands := map[int][]int{}
	for i, slot := range slots {
		p, _ := device(t, s, i).GetPciInfo()
		bus = append(bus, "0000:"+lower(cString(p.BusId[:])[9:]))
		numa = append(numa, slot.NUMANode)
		roots[slot.RootComplex] = append(roots[slot.RootComplex], i)
		islands[s.gpus[i].island] = append(islands[s.gpus[i].island], i)
	}
	if !slices.Equal(bus, c.BusIDs.Value) {
		t.Errorf("bus IDs %v, the fixture says %v", bus, c.BusIDs.Value)
	}
	if !slices.Equal(numa, c.NUMANodes.Value) {
		t.Errorf("NUMA nodes %v, the fixture says %v", numa, c.NUMANodes.Value)
	}
	if got, want := groups(roots), groups2(c.PCIeRootGroups.Value); got != want {
		t.Errorf("GPUs sharing a PCIe root complex %s, the fixture says %s", got, want)
	}
	if got, want := groups(islands), groups2(c.NVLinkIslands.Value); got != want {
		t.Errorf("NVLink islands %s, the fixture says %s", got, want)
	}
}

// groups writes a partition of GPU indexes in a canonical form.
func groups[K comparable](m map[K][]int) string {
	var g [][]int
	for _, v := range m {
		g = append(g, v)
	}
	return groups2(g)
}

func groups2(g [][]int) string {
	var parts []string
	for _, v := range g {
		v = slices.Clone(v)
		slices.Sort(v)
		var s []string
		for _, i := range v {
			s = append(s, strconv.Itoa(i))
		}
		parts = append(parts, strings.Join(s, ","))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, "} {") + "}"
}
