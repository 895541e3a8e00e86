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
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpudra/gpudra/internal/textsafe"
)

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// lines is text whose newlines are meant, already escaped with
// textsafe.Text: printf leaves it as it is.
type lines string

// printf is fmt.Fprintf for the text report: what it shows comes from
// cluster objects and manifests, so every string argument is escaped
// with textsafe.Line (no value can forge a line or move the cursor),
// except lines, already escaped and meant to hold newlines.
func printf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = textsafe.Line(v)
		case lines:
			args[i] = string(v)
		}
	}
	fmt.Fprintf(w, format, args...)
}

// WriteText writes the report for people: the inventory, each class and
// claim with what it matches and gets, then the findings. What is not
// printable in names, attributes and messages is escaped.
func (rep *Report) WriteText(w io.Writer, verbose bool) error {
	rep.writeInventory(w)
	if verbose {
		rep.writeSelectors(w)
	}
	rep.writeClasses(w)
	rep.writeClaims(w)
	rep.writePods(w)
	rep.writeIgnored(w)
	printf(w, "\n%s\n", rep.summary(verbose))
	for _, f := range rep.Findings {
		if f.Severity == SeverityNote && !verbose {
			continue
		}
		writeFinding(w, f)
	}
	return nil
}

// writeInventory writes what the inventory holds and the feature set.
func (rep *Report) writeInventory(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	inv := rep.Inventory
	p("inventory: %s\n", inv.Source)
	p("  %d node(s), %d ResourceSlice(s), %d device(s); drivers: %s\n", inv.Nodes, inv.Slices, inv.Devices, strings.Join(inv.Drivers, ", "))
	for _, n := range inv.Notes {
		p("  %s\n", n)
	}
	p("  spares: %s\n", inv.Spares)
	p("kubernetes %s feature set", rep.KubernetesVersion)
	if rep.Sequential {
		p(", claims allocated in sequence")
	}
	p("\n")
}

// writeSelectors lists every selector with its type, cost and matches
// (--verbose).
func (rep *Report) writeSelectors(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	p("\nselectors (%d):\n", len(rep.Selectors))
	for _, s := range rep.Selectors {
		status := fmt.Sprintf("type %s, cost %d, matches %d of %d", s.Type, s.Cost, s.Matches, s.Devices)
		if s.Error != "" {
			status = "does not compile"
		}
		p("  %s %s %s: %s\n    %s\n", s.Source.File, s.Object, s.Field, status, oneLine(s.Expression))
	}
}

// writeClasses lists the DeviceClasses with what they match.
func (rep *Report) writeClasses(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	if len(rep.Classes) > 0 {
		p("\ndevice classes:\n")
		for _, c := range rep.Classes {
			p("  %-28s %s\n", c.Name, matchText(c.Matches))
		}
	}
}

// writeClaims lists the claims with their requests and what each gets,
// or why it cannot be allocated.
func (rep *Report) writeClaims(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	if len(rep.Claims) > 0 {
		p("\nclaims:\n")
		for _, c := range rep.Claims {
			p("  %s  (%s, %s)\n", c.Name, c.From, c.Source.File)
			for _, rq := range c.Requests {
				writeRequest(w, rq, "    ")
			}
			switch {
			case c.Allocation != nil:
				p("    ALLOCATED on %s:", c.Allocation.Node)
				for _, d := range c.Allocation.Devices {
					p(" %s=%s", d.Request, d.Device)
				}
				p("\n")
				for _, d := range c.Allocation.Devices {
					if i := strings.Index(d.Request, "/"); i >= 0 {
						p("    firstAvailable: took subrequest %s for request %s\n", d.Request[i+1:], d.Request[:i])
						break
					}
				}
				if c.PrepareFails != "" {
					p("    PREPARE FAILS: %s\n", c.PrepareFails)
				}
			case len(c.Unsatisfiable) > 0:
				p("    UNSATISFIABLE:\n")
				for _, why := range c.Unsatisfiable {
					p("      - %s\n", why)
				}
			}
		}
	}
}

// writePods lists the pods with the node and devices each container gets,
// or why the pod stays Pending.
func (rep *Report) writePods(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	if len(rep.Pods) > 0 {
		p("\npods:\n")
		for _, pod := range rep.Pods {
			name := pod.Name
			if pod.Owner != "" {
				name += " (of " + pod.Owner + ")"
			}
			switch {
			case len(pod.Blocked) > 0:
				p("  %s: PENDING (%s)\n", name, strings.Join(pod.Blocked, "; "))
				continue
			case pod.Pending:
				p("  %s: PENDING (a claim cannot be allocated)\n", name)
				continue
			case pod.NoDRA:
				p("  %s: needs no DRA device (no resource claims, no extended resource a DeviceClass maps)\n", name)
				continue
			case len(pod.PrepareFails) > 0:
				p("  %s on %s: CONTAINERCREATING (gpudra's kubelet plugin refuses to prepare it; see the findings)\n", name, pod.Node)
				for _, why := range pod.PrepareFails {
					p("    - %s\n", why)
				}
				continue
			}
			p("  %s on %s\n", name, pod.Node)
			for _, c := range pod.Containers {
				devs := "no devices"
				if len(c.Devices) > 0 {
					devs = strings.Join(c.Devices, ", ")
				}
				p("    container %s: %s\n", c.Name, devs)
			}
		}
	}
}

// writeIgnored lists the objects check does not read.
func (rep *Report) writeIgnored(w io.Writer) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	if len(rep.Ignored) > 0 {
		p("\nignored (nothing to check):\n")
		for _, s := range rep.Ignored {
			p("  %s\n", s)
		}
	}
}

// writeFinding writes one finding: where, what, and the hint.
func writeFinding(w io.Writer, f Finding) {
	p := func(format string, args ...any) { printf(w, format, args...) }
	loc := f.Source.String()
	if f.Source.File == "" {
		loc = "inventory"
	}
	kind := f.Severity + ": " + string(f.Kind)
	if f.Refusal != "" {
		kind += " " + f.Refusal
	}
	p("\n%s: %s [%s]\n", loc, f.Object, kind)
	if f.Field != "" {
		p("  field: %s\n", f.Field)
	}
	if f.Expression != "" && f.Caret == "" && !strings.Contains(f.Message, "\n |") {
		p("  expression: %s\n", oneLine(f.Expression))
	}
	p("  %s\n", lines(indent(textsafe.Text(f.Message), "  ")))
	if f.Caret != "" {
		p("  %s\n", lines(indent(textsafe.Text(f.Caret), "  ")))
	}
	if len(f.Devices) > 0 {
		p("  devices: %s\n", strings.Join(f.Devices, ", "))
	}
	if f.Hint != "" {
		p("  hint: %s\n", f.Hint)
	}
}

func writeRequest(w io.Writer, rq RequestInfo, pad string) {
	if rq.Sub != nil {
		printf(w, "%srequest %s: firstAvailable\n", pad, rq.Name)
		for _, s := range rq.Sub {
			writeRequest(w, s, pad+"  ")
		}
		return
	}
	want := fmt.Sprintf("%d", rq.Count)
	if rq.Mode == "All" {
		want = "all"
	}
	printf(w, "%srequest %s: %s × %s; %s\n", pad, rq.Name, want, rq.Class, matchText(rq.Matches))
}

func matchText(m Matches) string {
	s := fmt.Sprintf("matches %d device(s) on %d node(s)", m.Count, m.Nodes)
	if len(m.Devices) > 0 {
		list := m.Devices
		more := ""
		if len(list) > 16 {
			list, more = list[:16], fmt.Sprintf(" … (%d more)", len(m.Devices)-16)
		}
		s += ": " + strings.Join(list, " ") + more
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func indent(s, pad string) string { return strings.ReplaceAll(s, "\n", "\n"+pad) }

// summary says how many findings of each severity there are, and what
// they mean for the exit status.
func (rep *Report) summary(verbose bool) string {
	errs, warns, notes := rep.Errors(), rep.Warnings(), rep.Notes()
	if errs == 0 && warns == 0 {
		switch {
		case notes == 0:
			return "no findings"
		case verbose:
			return fmt.Sprintf("no findings, %d note(s):", notes)
		}
		return fmt.Sprintf("no findings (%d note(s); --verbose lists them)", notes)
	}
	var parts []string
	if errs > 0 {
		parts = append(parts, fmt.Sprintf("%d error(s)", errs))
	}
	if warns > 0 {
		parts = append(parts, fmt.Sprintf("%d warning(s)", warns))
	}
	if notes > 0 {
		n := fmt.Sprintf("%d note(s)", notes)
		if !verbose {
			n += "; --verbose lists them"
		}
		parts = append(parts, n)
	}
	var verdict string
	switch {
	case errs > 0:
		verdict = "exit status 1: the cluster or gpudra's plugin would refuse something, or a pod would not run"
	case warns > 0 && rep.Strict:
		verdict = "exit status 1 (--strict): warnings count"
	case warns > 0:
		verdict = "exit status 0: nothing is refused; the warnings say what may not be what you meant (--strict fails on them)"
	}
	return strings.Join(parts, ", ") + " — " + verdict + ":"
}
