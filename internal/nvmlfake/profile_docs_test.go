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
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

const (
	profileDocsBegin = "<!-- BEGIN GENERATED: go test ./internal/nvmlfake -run TestProfileDocs -update -->\n"
	profileDocsEnd   = "<!-- END GENERATED -->\n"
)

// TestProfileDocs keeps every list of the fake profiles and models that
// lives outside Go derived from the catalog: the tables of
// docs/fake-gpus.md and the enum of the chart's fakeProfile value. A new
// profile or model appears in both with -update; without it, this fails.
func TestProfileDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	var buf bytes.Buffer
	writeProfileTable(&buf)
	writeModelTable(&buf)
	gpudratest.GoldenRewrite(t, filepath.Join(root, "docs", "fake-gpus.md"), func(doc []byte) []byte {
		return gpudratest.ReplaceSection(t, doc, profileDocsBegin, profileDocsEnd, buf.Bytes())
	})
	enum, err := json.Marshal(Profiles())
	if err != nil {
		t.Fatal(err)
	}
	// The fakeProfile property's one-line enum.
	re := regexp.MustCompile(`("fakeProfile": \{[^}]*"enum": )\[[^\]]*\]`)
	gpudratest.GoldenRewrite(t, filepath.Join(root, "deployments", "helm", "gpudra", "values.schema.json"), func(doc []byte) []byte {
		if !re.Match(doc) {
			t.Fatal("values.schema.json: no fakeProfile enum found")
		}
		return re.ReplaceAll(doc, []byte("${1}"+strings.ReplaceAll(string(enum), ",", ", ")))
	})
}

func writeProfileTable(w *bytes.Buffer) {
	fmt.Fprintf(w, "| profile | GPUs (index order) | NVLink islands | PCIe / NUMA | driver / CUDA |\n| --- | --- | --- | --- | --- |\n")
	for _, name := range Profiles() {
		p := builtinProfiles[name]
		var gpus, islands []string
		members := map[int][]string{}
		var order []int
		for i, g := range p.GPUs {
			gpus = append(gpus, "`"+g.Model+"`")
			if g.NVLinkIsland != nil {
				if _, ok := members[*g.NVLinkIsland]; !ok {
					order = append(order, *g.NVLinkIsland)
				}
				members[*g.NVLinkIsland] = append(members[*g.NVLinkIsland], fmt.Sprint(i))
			}
		}
		for _, id := range order {
			islands = append(islands, fmt.Sprintf("%d: GPUs %s", id, strings.Join(members[id], ",")))
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s / %s |\n", name, compress(gpus), strings.Join(islands, "; "), pcieLayout(p),
			orDefault(p.DriverVersion, defaultDriverVersion), orDefault(p.CUDADriverVersion, defaultCUDAVersion))
	}
	fmt.Fprintln(w)
}

// pcieLayout describes a profile's PCIe tree: the bus numbers, NUMA nodes
// and shared roots of a real system, with its evidence, or the synthetic
// layout.
func pcieLayout(p ProfileFile) string {
	if p.GPUs[0].PCI == nil {
		return "synthetic: two GPUs per root complex, two NUMA nodes"
	}
	var bus, numa []string
	perRoot := map[int]int{}
	for _, g := range p.GPUs {
		bus = append(bus, fmt.Sprintf("%02x", g.PCI.Bus))
		numa = append(numa, fmt.Sprint(g.PCI.NUMANode))
		perRoot[g.PCI.Root]++
	}
	share := "one GPU per root complex"
	if perRoot[p.GPUs[0].PCI.Root] > 1 {
		share = fmt.Sprintf("%d GPUs per root complex", perRoot[p.GPUs[0].PCI.Root])
	}
	return fmt.Sprintf("buses %s; NUMA %s; %s", strings.Join(bus, ","), strings.Join(numa, ","), share)
}

// compress writes runs of the same model as "8 × `x`".
func compress(items []string) string {
	var out []string
	for i := 0; i < len(items); {
		j := i
		for j < len(items) && items[j] == items[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%d × %s", j-i, items[i]))
		} else {
			out = append(out, items[i])
		}
		i = j
	}
	return strings.Join(out, ", ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func writeModelTable(w *bytes.Buffer) {
	fmt.Fprintf(w, "| model | product name | memory (NVML) | SMs | NVLink links | MIG | evidence |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, key := range Models() {
		m := catalog[key]
		mig := "no"
		if m.mig != nil {
			mig = fmt.Sprintf("%d profiles", len(m.mig.profiles))
			if m.migNeedsReset {
				mig += ", mode change needs a GPU reset"
			}
		}
		fmt.Fprintf(w, "| `%s` | %s | %d MiB | %d | %d | %s | [calibration](../internal/nvmlfake/testdata/calibration/%s.yaml) |\n",
			key, m.config.Name, m.config.MemoryMB, m.sms, m.nvlinks, mig, key)
	}
}
