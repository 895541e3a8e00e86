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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// corpusCase is one file of testdata/corpus: manifests shaped like those
// users bring from other projects, and what check must say about them,
// from the file's header comments:
//
//	# class: false-pass          the defect class the case guards against
//	                             (false-pass, false-fail, silent-drop,
//	                             message) or "works": what runs as is
//	# profile: mixed             the fake node (default dgx-h100)
//	# kubernetes: 1.35           the feature set (default the newest)
//	# sequential: true           claims hold their devices in file order
//	# consumable-capacity: true  the node pool shares GPUs (--consumable-capacity)
//	# share-sharing: TimeSlicing the pool's default sharing of a share
//	                             (--consumable-capacity-sharing, default MPS)
//	# mps: false                 the pool runs no MPS daemons (--mps=false)
//	# nodes: 3                   the number of fake nodes (default 1)
//	# mig-spare-gpus: fleet      the pool's --mig-spare-gpus (default 1);
//	                             fleet as gpudra check takes it: the
//	                             controller's default target of nodes
//	                             keeps a spare, the others wait for one
//	# exit: 1                    the exit status (2: the input is unusable)
//	# error: TEXT                with exit 2, what the error says
//	# finding: KIND at LINE: TEXT   a finding of that kind (prefix "note "
//	                             or "warning " for those severities), at
//	                             that line, whose message or hint contains
//	                             TEXT; every error and warning must be
//	                             listed by kind
//	# refusal: KIND              a refusal of the plugin's prepare
//	                             (internal/claimplan) that a finding predicts
//	# simulate: agree | prepare-fails | unschedulable | skip: why
//	                             what gpudra simulate does with the pods
//	                             (TestCheckAgreesWithSimulate)
type corpusCase struct {
	file       string
	class      string
	profile    string
	kubernetes string
	sequential bool
	pool       fakenodes.Pool
	// shareSharing and noMPS are the plugin's settings on the pool.
	shareSharing string
	noMPS        bool
	// nodes is the number of fake nodes; spareGPUs the pool's
	// --mig-spare-gpus as written ("" the default).
	nodes      int
	spareGPUs  string
	exit       int
	inputError string
	findings   []corpusFinding
	refusals   []string
	simulate   string
}

type corpusFinding struct {
	kind     FindingKind
	severity string
	line     int
	text     string
}

// defectClasses are the classes a corpus case may guard against.
var defectClasses = []string{"false-pass", "false-fail", "silent-drop", "message", "works"}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var out []corpusCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := corpusCase{file: f, profile: fakenodes.DefaultProfile, exit: -1, shareSharing: "MPS", nodes: 1}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") {
				break
			}
			key, value, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ": ")
			if !ok {
				continue
			}
			switch key {
			case "class":
				c.class = value
			case "consumable-capacity":
				c.pool.ConsumableCapacity = value == "true"
			case "share-sharing":
				c.shareSharing = value
			case "mps":
				c.noMPS = value == "false"
			case "nodes":
				if c.nodes, err = strconv.Atoi(value); err != nil || c.nodes < 1 {
					t.Fatalf("%s: nodes: %q", f, value)
				}
			case "mig-spare-gpus":
				spare, err := slicebuilder.ParseSpareGPUs(value)
				if err != nil {
					t.Fatalf("%s: mig-spare-gpus: %v", f, err)
				}
				c.spareGPUs, c.pool.SpareGPUs = value, spare
			case "refusal":
				c.refusals = append(c.refusals, value)
			case "error":
				c.inputError = value
			case "profile":
				c.profile = value
			case "kubernetes":
				c.kubernetes = value
			case "sequential":
				c.sequential = value == "true"
			case "exit":
				c.exit, _ = strconv.Atoi(value)
			case "simulate":
				c.simulate = value
			case "finding":
				c.findings = append(c.findings, parseCorpusFinding(t, f, value))
			}
		}
		if c.exit < 0 || c.simulate == "" || !slices.Contains(defectClasses, c.class) {
			t.Fatalf("%s: the header needs exit:, simulate: and class: (one of %v)", f, defectClasses)
		}
		out = append(out, c)
	}
	return out
}

// parseCorpusFinding reads "[note |warning ]KIND[ at LINE][: TEXT]".
func parseCorpusFinding(t *testing.T, file, s string) corpusFinding {
	f := corpusFinding{severity: SeverityError}
	for _, sev := range []string{SeverityNote, SeverityWarning} {
		if rest, ok := strings.CutPrefix(s, sev+" "); ok {
			f.severity, s = sev, rest
		}
	}
	head, text, _ := strings.Cut(s, ": ")
	f.text = text
	kind, at, hasLine := strings.Cut(head, " at ")
	f.kind = FindingKind(kind)
	if hasLine {
		n, err := strconv.Atoi(at)
		if err != nil {
			t.Fatalf("%s: finding %q: bad line", file, s)
		}
		f.line = n
	}
	return f
}

// checkCorpus runs check on one corpus file as its header says; an
// unusable input (exit status 2) returns the error instead.
func checkCorpus(t *testing.T, c corpusCase) (*Report, error) {
	t.Helper()
	in, err := scheduler.LoadPaths([]string{c.file}, nil)
	if err != nil {
		return nil, err
	}
	rep, err := Run(context.Background(), c.options(t, Options{Inputs: in, ListLimit: 8}))
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// TestCorpus: for each corpus file, the exit status and the findings its
// header promises, and a golden summary of the whole report
// (testdata/corpus/golden/; after an intended change run
// go test ./internal/check -run TestCorpus -update and review the diff).
func TestCorpus(t *testing.T) {
	for _, c := range loadCorpus(t) {
		name := strings.TrimSuffix(filepath.Base(c.file), ".yaml")
		t.Run(name, func(t *testing.T) {
			rep, err := checkCorpus(t, c)
			if c.exit == ExitInput || err != nil {
				if code := ExitCode(rep, err); code != c.exit || err == nil || !strings.Contains(err.Error(), c.inputError) {
					t.Errorf("exit %d (%v), want %d saying %q", code, err, c.exit, c.inputError)
				}
				return
			}
			if rep.ExitCode != c.exit {
				t.Errorf("exit %d, want %d", rep.ExitCode, c.exit)
			}
			listed := map[FindingKind]bool{}
			for _, want := range c.findings {
				listed[want.kind] = true
				if !slices.ContainsFunc(rep.Findings, want.matches) {
					t.Errorf("no finding %+v among:\n%s", want, describeFindings(rep))
				}
			}
			for _, f := range rep.Findings {
				if f.Severity != SeverityNote && !listed[f.Kind] {
					t.Errorf("unexpected finding: line %d %s %s: %s", f.Source.Line, f.Severity, f.Kind, f.Message)
				}
			}
			for _, want := range c.refusals {
				if !slices.ContainsFunc(rep.Findings, func(f Finding) bool { return f.Refusal == want }) {
					t.Errorf("no finding predicts the refusal %s among:\n%s", want, describeFindings(rep))
				}
			}
			for _, f := range rep.Findings {
				if f.Refusal != "" && !slices.Contains(c.refusals, f.Refusal) {
					t.Errorf("the header lists no refusal %s (line %d %s: %s)", f.Refusal, f.Source.Line, f.Kind, f.Message)
				}
			}
			got, err := json.MarshalIndent(summarize(c.profile, rep), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			gpudratest.GoldenFile(t, filepath.Join("testdata", "corpus", "golden", name+".json"), append(got, '\n'))
		})
	}
}

func (want corpusFinding) matches(f Finding) bool {
	return f.Kind == want.kind && f.Severity == want.severity &&
		(want.line == 0 || f.Source.Line == want.line) &&
		strings.Contains(f.Message+"\n"+f.Hint, want.text)
}

func describeFindings(rep *Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "  line %d %s %s %s: %s\n    hint: %s\n", f.Source.Line, f.Severity, f.Kind, f.Refusal, f.Message, f.Hint)
	}
	return b.String()
}

// options are the check options of the case's node pool and version.
func (c corpusCase) options(t testing.TB, o Options) Options {
	t.Helper()
	o.KubernetesVersion, o.Sequential, o.BuiltinClasses = c.kubernetes, c.sequential, true
	o.ShareSharing, o.MPSDisabled = c.shareSharing, c.noMPS
	pool, notes := c.poolFor(t)
	c.nodes = max(c.nodes, 1) // cases built in code say none
	if pool.SpareGPUs.Fleet {
		// As gpudra check takes fleet mode (cmd/gpudra, fleetSpareNodes).
		pool.SpareGPUs = slicebuilder.FleetAssigned(1)
		target, err := migspares.ParseTarget(migspares.DefaultTarget)
		if err != nil {
			t.Fatal(err)
		}
		pool.SpareNodes = target.Nodes(c.nodes)
		o.SpareNodes = pool.SpareNodes
	}
	o.Slices = fakePoolInventory(t, c.profile, c.nodes, pool)
	rp := newRepublisher(t, c.profile, pool)
	o.Republish, o.Spare = rp.Slices, rp.SparedSlices
	o.SpareGPUs = pool.SpareGPUs.String()
	o.SlicesSource = fmt.Sprintf("profile %s × %d node(s)", c.profile, c.nodes)
	o.SlicesNotes = notes
	return o
}

// poolFor is the case's pool as the plugin publishes it on the case's
// Kubernetes version, as gpudra check builds it.
func (c corpusCase) poolFor(t testing.TB) (fakenodes.Pool, []string) {
	t.Helper()
	version := c.kubernetes
	if version == "" {
		version = scheduler.DefaultKubernetesVersion
	}
	f, err := scheduler.FeaturesFor(version)
	if err != nil {
		t.Fatal(err)
	}
	return c.pool.On(f)
}

// TestEveryRefusalCovered: every refusal the plugin's prepare can make
// (claimplan.Kinds) is either checkable, and then a corpus case shows
// check predicting it (TestCorpus holds the case to its header), or says
// why check cannot know it: a stale allocation, the node's hardware or
// files.
func TestEveryRefusalCovered(t *testing.T) {
	shown := map[string][]string{}
	for _, c := range loadCorpus(t) {
		for _, k := range c.refusals {
			shown[k] = append(shown[k], filepath.Base(c.file))
		}
	}
	known := map[string]bool{}
	for _, k := range claimplan.Kinds {
		known[string(k.Kind)] = true
		switch {
		case k.Checkable && len(shown[string(k.Kind)]) == 0:
			t.Errorf("refusal %s: gpudra check can predict it, but no corpus case shows it", k.Kind)
		case !k.Checkable && len(shown[string(k.Kind)]) > 0:
			t.Errorf("refusal %s: listed as needing %q, yet corpus cases %v show check predicting it", k.Kind, k.Why, shown[string(k.Kind)])
		}
	}
	for k, files := range shown {
		if !known[k] {
			t.Errorf("corpus cases %v name refusal %q, which claimplan does not know", files, k)
		}
	}
}
