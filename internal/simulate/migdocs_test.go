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

package simulate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const (
	docsBegin = "<!-- BEGIN GENERATED: go test ./internal/simulate -run TestMigDocs -update -->\n"
	docsEnd   = "<!-- END GENERATED -->\n"
)

// TestMigDocs keeps the profile tables of docs/mig.md equal to what the
// plugin publishes for each MIG-capable model of the fake's catalog: every
// profile, its device names, capacities and counters, and each GPU's
// counter set. A model added to the catalog gets its table here.
func TestMigDocs(t *testing.T) {
	var buf bytes.Buffer
	for _, key := range nvmlfake.Models() {
		writeModelDoc(t, &buf, key)
	}
	gpudratest.GoldenRewrite(t, filepath.Join("..", "..", "docs", "mig.md"), func(doc []byte) []byte {
		return gpudratest.ReplaceSection(t, doc, docsBegin, docsEnd, buf.Bytes())
	})
}

func writeModelDoc(t *testing.T, w *bytes.Buffer, key string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(file, []byte("gpus:\n- model: "+key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := nvmlfake.New(nvmlfake.Options{Profile: file, NodeName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	s.Init()
	defer s.Shutdown()
	node, err := discovery.Discover(context.Background(), s, "docs")
	if err != nil {
		t.Fatal(err)
	}
	g := node.GPUs[0]
	m := g.MIG
	if m == nil {
		return // not MIG-capable
	}
	reset := "no: gpudra switches MIG mode on when a partition is prepared, and off again when the last one is released"
	if m.ModeChangeNeedsReset {
		reset = "yes: gpudra publishes this GPU's placements only while an admin has MIG mode on, and the whole GPU only while it is off"
	}
	fmt.Fprintf(w, "### %s (`%s`)\n\n", g.ProductName, key)
	fmt.Fprintf(w, "%d memory slices, %d compute slices. MIG mode change needs a GPU reset: %s.\n\n", m.MemorySlices, m.ComputeSlices, reset)
	fmt.Fprintf(w, "| profile | device names (GPU minor 0) | memory | SMs | copy engines | decoders | encoders | JPEG | OFA | at most | counters consumed besides the memory slices |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	limited := map[uint32]bool{}
	for _, p := range m.LimitedProfiles() {
		limited[p.ID] = true
	}
	for _, p := range m.Profiles {
		var names []string
		for _, pl := range p.Placements {
			names = append(names, fmt.Sprintf("`%s`", gpu.MigDeviceName(0, p.Name, pl.Start)))
		}
		var consumed []string
		if m.ComputeLimitBinds() {
			consumed = append(consumed, fmt.Sprintf("%s %d", slicebuilder.CounterComputeSlices, p.ComputeSlices))
		}
		if limited[p.ID] {
			consumed = append(consumed, slicebuilder.InstancesCounter(p.Name)+" 1")
		}
		if len(consumed) == 0 {
			consumed = []string{"—"}
		}
		fmt.Fprintf(w, "| `%s` | %s | %dMi | %d | %d | %d | %d | %d | %d | %d | %s |\n", p.Name, strings.Join(names, " "),
			p.MemoryBytes>>20, p.Multiprocessors, p.CopyEngines, p.Decoders, p.Encoders, p.JPEGEngines, p.OFAEngines, p.InstanceCount, strings.Join(consumed, ", "))
	}
	who := "published, and consumed whole by `gpu-0`, while the GPU publishes its placements"
	if m.ModeChangeNeedsReset {
		// Shown as published while an admin has MIG mode on.
		node.GPUs[0].MigEnabled = true
		who = "published while MIG mode is on, when the whole GPU is not"
	}
	res, err := slicebuilder.Build(node, slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range res.Pools["docs"].Slices {
		for _, cs := range sl.SharedCounters {
			var names []string
			for n := range cs.Counters {
				names = append(names, n)
			}
			sort.Strings(names)
			var parts []string
			for _, n := range names {
				v := cs.Counters[n].Value
				parts = append(parts, fmt.Sprintf("%s %s", n, v.String()))
			}
			fmt.Fprintf(w, "\nCounter set `%s` (%s): %s.\n\n", cs.Name, who, strings.Join(parts, ", "))
		}
	}
}
