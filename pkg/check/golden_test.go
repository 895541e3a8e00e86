package check

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/pkg/fakenodes"
	"github.com/gpudra/gpudra/pkg/nvmlfake"
	"github.com/gpudra/gpudra/pkg/scheduler"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the current DeviceClasses, examples and slice builder")

// golden is what the shipped DeviceClasses and examples promise on one
// node of a fake profile: which devices each class and request matches,
// what each claim is allocated, and the findings.
type golden struct {
	Profile  string              `json:"profile"`
	ExitCode int                 `json:"exitCode"`
	Devices  int                 `json:"devices"`
	Classes  map[string][]string `json:"classes"`
	Requests map[string][]string `json:"requests"`
	// Allocations: claim → "request=device" for each result, or
	// "UNSATISFIABLE: why".
	Allocations map[string][]string `json:"allocations"`
	// Pods: pod → "container: devices", or "PENDING".
	Pods     map[string][]string `json:"pods"`
	Findings []string            `json:"findings"`
}

func summarize(profile string, rep *Report) golden {
	g := golden{Profile: profile, ExitCode: rep.ExitCode, Devices: rep.Inventory.Devices,
		Classes: map[string][]string{}, Requests: map[string][]string{}, Allocations: map[string][]string{}, Findings: []string{}}
	for _, c := range rep.Classes {
		g.Classes[c.Name] = matchList(c.Matches)
	}
	var addRequest func(claim string, rq RequestInfo)
	addRequest = func(claim string, rq RequestInfo) {
		if rq.Sub != nil {
			for _, s := range rq.Sub {
				addRequest(claim, s)
			}
			return
		}
		g.Requests[claim+" "+rq.Name] = matchList(rq.Matches)
	}
	for _, c := range rep.Claims {
		for _, rq := range c.Requests {
			addRequest(c.Name, rq)
		}
		switch {
		case c.Allocation != nil:
			var devs []string
			for _, d := range c.Allocation.Devices {
				devs = append(devs, fmt.Sprintf("%s=%s/%s", d.Request, d.Pool, d.Device))
			}
			g.Allocations[c.Name] = devs
		default:
			g.Allocations[c.Name] = []string{"UNSATISFIABLE: " + strings.Join(c.Unsatisfiable, "; ")}
		}
	}
	g.Pods = map[string][]string{}
	for _, p := range rep.Pods {
		if p.Pending {
			g.Pods[p.Name] = []string{"PENDING"}
			continue
		}
		if len(p.PrepareFails) > 0 {
			g.Pods[p.Name] = []string{"CONTAINERCREATING on " + p.Node}
			continue
		}
		for _, c := range p.Containers {
			g.Pods[p.Name] = append(g.Pods[p.Name], p.Node+" "+c.Name+": "+strings.Join(c.Devices, ", "))
		}
	}
	for _, f := range rep.Findings {
		g.Findings = append(g.Findings, fmt.Sprintf("%s %s: %s: %s", f.Severity, f.Kind, f.Object, f.Message))
	}
	sort.Strings(g.Findings)
	return g
}

// matchList is the devices matched, or how many when they were not
// listed (past Options.ListLimit).
func matchList(m Matches) []string {
	switch {
	case m.Devices != nil:
		return m.Devices
	case m.Count == 0:
		return []string{}
	}
	return []string{fmt.Sprintf("(%d devices on %d nodes)", m.Count, m.Nodes)}
}

// TestGoldenShipped runs gpudra check over deviceclasses/ (the DeviceClasses
// and every example, as built into the binary) on each fake profile and
// compares with testdata/golden/<profile>.json. When a shipped class or
// example stops matching what it promised, this fails; after an intended
// change run `go test ./pkg/check -run TestGoldenShipped -update` and
// review the diff.
func TestGoldenShipped(t *testing.T) {
	for _, profile := range nvmlfake.Profiles() {
		t.Run(profile, func(t *testing.T) {
			in, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
			if err != nil {
				t.Fatal(err)
			}
			// Shareable GPUs, as on the node pools the sharing examples
			// are for; every other example takes whole GPUs either way.
			rep, err := Run(context.Background(), onSharedProfile(t, profile, Options{Inputs: in, BuiltinClasses: true, ListLimit: 1 << 20}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(summarize(profile, rep), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", "golden", profile+".json"), append(got, '\n'), "TestGoldenShipped")
		})
	}
}

// compareGolden compares got with a golden file, or rewrites the file
// with -update; test names the test to rerun.
func compareGolden(t *testing.T, file string, got []byte, test string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (new case? run go test ./pkg/check -run %s -update and review the result)", err, test)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the report differs from %s; if intended, run\n  go test ./pkg/check -run %s -update\nand review the diff.\n%s", file, test, lineDiff(string(want), string(got)))
	}
}

// TestExamplesRunOnDemoNode: every shipped example is allocatable, without
// findings, on the node `make demo` uses.
func TestExamplesRunOnDemoNode(t *testing.T) {
	in, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
	if err != nil {
		t.Fatal(err)
	}
	// The demo node publishes shareable GPUs, for the sharing examples.
	rep, err := Run(context.Background(), onSharedProfile(t, fakenodes.DefaultProfile, Options{Inputs: in, BuiltinClasses: true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Claims) == 0 {
		t.Fatal("no claims in the examples")
	}
	for _, c := range rep.Claims {
		if c.Allocation == nil {
			t.Errorf("%s (%s): not allocatable on %s: %v", c.Name, c.Source.File, fakenodes.DefaultProfile, c.Unsatisfiable)
		}
	}
	for _, p := range rep.Pods {
		if p.Pending {
			t.Errorf("pod %s stays Pending on %s", p.Name, fakenodes.DefaultProfile)
		}
		for _, c := range p.Containers {
			if len(c.Devices) == 0 {
				t.Errorf("pod %s container %s receives no device", p.Name, c.Name)
			}
		}
	}
	for _, f := range rep.Findings {
		if f.Severity != SeverityNote {
			t.Errorf("finding: %s %s: %s", f.Kind, f.Object, f.Message)
		}
	}
}

// lineDiff is a unified-style diff of two texts (longest common
// subsequence of lines), at most 60 lines of it.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j]: length of the LCS of w[i:] and g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	lines := 0
	emit := func(prefix, line string) {
		if lines < 60 {
			b.WriteString(prefix + line + "\n")
		}
		lines++
	}
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i++
			j++
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			emit("- ", w[i])
			i++
		default:
			emit("+ ", g[j])
			j++
		}
	}
	if lines > 60 {
		fmt.Fprintf(&b, "… %d more changed lines\n", lines-60)
	}
	return b.String()
}
