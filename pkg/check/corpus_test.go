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

	"github.com/gpudra/gpudra/pkg/fakenodes"
	"github.com/gpudra/gpudra/pkg/scheduler"
)

// corpusCase is one file of testdata/corpus: manifests shaped like those
// users bring from other projects, and what check must say about them,
// from the file's header comments:
//
//	# profile: mixed             the fake node (default dgx-h100)
//	# kubernetes: 1.35           the feature set (default the newest)
//	# sequential: true           claims hold their devices in file order
//	# exit: 1                    the exit status
//	# finding: KIND at LINE: TEXT   a finding of that kind (prefix "note "
//	                             for a note), at that line, whose message
//	                             or hint contains TEXT; every finding that
//	                             counts must be listed by kind
//	# simulate: agree | prepare-fails | unschedulable | skip: why
//	                             what gpudra simulate does with the pods
//	                             (TestCheckAgreesWithSimulate)
type corpusCase struct {
	file       string
	profile    string
	kubernetes string
	sequential bool
	exit       int
	findings   []corpusFinding
	simulate   string
}

type corpusFinding struct {
	kind FindingKind
	note bool
	line int
	text string
}

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
		c := corpusCase{file: f, profile: fakenodes.DefaultProfile, exit: -1}
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
		if c.exit < 0 || c.simulate == "" {
			t.Fatalf("%s: the header needs exit: and simulate:", f)
		}
		out = append(out, c)
	}
	return out
}

// parseCorpusFinding reads "[note ]KIND[ at LINE][: TEXT]".
func parseCorpusFinding(t *testing.T, file, s string) corpusFinding {
	var f corpusFinding
	if rest, ok := strings.CutPrefix(s, "note "); ok {
		f.note, s = true, rest
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

// checkCorpus runs check on one corpus file as its header says.
func checkCorpus(t *testing.T, c corpusCase) *Report {
	t.Helper()
	in, err := scheduler.LoadPaths([]string{c.file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), onProfile(t, c.profile, 1, Options{Inputs: in, KubernetesVersion: c.kubernetes, Sequential: c.sequential, BuiltinClasses: true, ListLimit: 8}))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCorpus: for each corpus file, the exit status and the findings its
// header promises, and a golden summary of the whole report
// (testdata/corpus/golden/; after an intended change run
// go test ./pkg/check -run TestCorpus -update and review the diff).
func TestCorpus(t *testing.T) {
	for _, c := range loadCorpus(t) {
		name := strings.TrimSuffix(filepath.Base(c.file), ".yaml")
		t.Run(name, func(t *testing.T) {
			rep := checkCorpus(t, c)
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
					t.Errorf("unexpected finding: line %d %s: %s", f.Source.Line, f.Kind, f.Message)
				}
			}
			got, err := json.MarshalIndent(summarize(c.profile, rep), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", "corpus", "golden", name+".json"), append(got, '\n'), "TestCorpus")
		})
	}
}

func (want corpusFinding) matches(f Finding) bool {
	return f.Kind == want.kind && (f.Severity == SeverityNote) == want.note &&
		(want.line == 0 || f.Source.Line == want.line) &&
		strings.Contains(f.Message+"\n"+f.Hint, want.text)
}

func describeFindings(rep *Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "  line %d %s %s: %s\n    hint: %s\n", f.Source.Line, f.Severity, f.Kind, f.Message, f.Hint)
	}
	return b.String()
}
