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

package check

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/scheduler"
)

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
// change run `go test ./internal/check -run TestGoldenShipped -update` and
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
			gpudratest.GoldenFile(t, filepath.Join("testdata", "golden", profile+".json"), append(got, '\n'))
		})
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
