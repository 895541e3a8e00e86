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
	"fmt"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// explain says why a unit could not be allocated on any node: for each
// request the first reason that rules it out everywhere, or, when each
// request alone could fit, that they do not fit together.
func (r *runner) explain(u *unit, todo []*claimEval, pinned string) {
	diagnose := r.explainer()
	own := make([][]string, len(todo))
	var blocker *claimEval
	for i, ce := range todo {
		for _, re := range ce.reqs {
			own[i] = append(own[i], diagnose.request(ce, re, pinned)...)
		}
		if len(own[i]) > 0 && blocker == nil {
			blocker = ce
		}
	}
	for i, ce := range todo {
		reasons := own[i]
		if len(reasons) == 0 && blocker != nil {
			// Another claim of the pod cannot be allocated: this one is
			// not either, and the other's finding says why.
			r.unsatisfiable(ce, podBlockedBy(blocker))
			continue
		}
		if len(reasons) == 0 {
			switch {
			case pinned != "":
				reasons = append(reasons, fmt.Sprintf("the pod shares a claim allocated on %s, and the rest of its claims do not fit there", pinned))
			case len(ce.reqs) > 1 || len(todo) > 1:
				reasons = append(reasons, "each request could be satisfied alone, but no node has devices for all requests of the claim (and the pod's other claims) at once")
			case len(ce.claim.Spec.Devices.Constraints) > 0:
				reasons = append(reasons, "enough devices match on some node, but the allocator found no combination that meets the claim's constraints")
			default:
				reasons = append(reasons, "enough devices match on some node, but the allocator could allocate none of them (see the findings)")
			}
		}
		r.unsatisfiable(ce, reasons...)
		f := Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Field: ce.field + ".devices",
			Message: fmt.Sprintf("claim %s cannot be allocated on any node of the inventory: %s", ce.info.Name, strings.Join(reasons, "; "))}
		if u.pod != "" {
			f.Message = fmt.Sprintf("pod %s: %s", u.pod, f.Message)
		}
		switch {
		case r.opts.Sequential:
			f.Hint = "with --sequential, claims earlier in the input hold their devices"
		case u.podObj.Owner != "":
			f.Hint = "the replicas of " + u.podObj.Owner + " run at the same time: each holds its devices"
		}
		if owner := u.podObj.Owner; owner != "" {
			if runsLater(u) {
				// The Job controller keeps the pod and starts it when an
				// earlier one completes: the Job takes longer, but runs.
				f.Severity = SeverityWarning
				f.Message += "; the Job's pods that do not fit now start as earlier ones complete, one after another"
				f.Hint = "set the Job's parallelism to what fits at once to say so, or add devices to run them all at once"
			}
			r.pending.add(owner+"\x00"+ce.source.String(), u.pod, f)
			continue
		}
		r.findings.add(f)
	}
}

// podBlockedBy is why a pod's claim is not allocated when another claim
// of the pod cannot be.
func podBlockedBy(blocker *claimEval) string {
	return fmt.Sprintf("the pod's claim %s cannot be allocated, and the scheduler allocates a pod's claims together or not at all", blocker.info.Name)
}

// runsLater says whether a pod that does not fit waits for its
// workload's earlier pods to complete rather than forever: a pod of a Job
// (or a CronJob's Job) other than its first. Replicas are placed in
// order and alike, so when the first pod fits, a later one that does not
// is short of the devices the earlier ones hold, which they give back
// when they complete; when the first does not fit, none ever does.
func runsLater(u *unit) bool {
	owner := u.podObj.Owner
	if !strings.HasPrefix(owner, "Job ") && !strings.HasPrefix(owner, "CronJob ") {
		return false
	}
	return !strings.HasSuffix(u.pod, "-0")
}

// pendingReplicas are the replicas of one workload that stay Pending on
// one claim source: one finding says it for all of them.
type pendingReplicas struct {
	finding int // in report.Findings
	owner   string
	pods    []string
}

// pendingLog owns the findings for workloads' replicas that stay
// Pending: the first replica's finding, per workload and claim source,
// stands for all of them, and finish says in it how many.
type pendingLog struct {
	report   *Report
	findings *findingLog
	// byKey are the Pending replicas by owner and claim source, order
	// their keys in the order found.
	byKey map[string]*pendingReplicas
	order []string
}

func newPendingLog(report *Report, findings *findingLog) *pendingLog {
	return &pendingLog{report: report, findings: findings, byKey: map[string]*pendingReplicas{}}
}

// add reports a workload's replica that stays Pending: the first one as
// f, the others added to its finding (finish).
func (pl *pendingLog) add(key, pod string, f Finding) {
	if p, ok := pl.byKey[key]; ok {
		p.pods = append(p.pods, pod)
		return
	}
	before := len(pl.report.Findings)
	pl.findings.add(f)
	if len(pl.report.Findings) == before {
		return
	}
	owner, _, _ := strings.Cut(key, "\x00")
	pl.byKey[key] = &pendingReplicas{finding: before, owner: owner, pods: []string{pod}}
	pl.order = append(pl.order, key)
}

// also counts a replica in the finding reported for key, if there is one.
func (pl *pendingLog) also(key, pod string) {
	if p, ok := pl.byKey[key]; ok {
		p.pods = append(p.pods, pod)
	}
}

// save is what the log holds, for restore: a gang's try that fails
// leaves no trace.
func (pl *pendingLog) save() (map[string]*pendingReplicas, int) {
	saved := map[string]*pendingReplicas{}
	for k, p := range pl.byKey {
		c := *p
		c.pods = slices.Clone(p.pods)
		saved[k] = &c
	}
	return saved, len(pl.order)
}

// restore puts back what save returned.
func (pl *pendingLog) restore(byKey map[string]*pendingReplicas, order int) {
	pl.byKey, pl.order = byKey, pl.order[:order]
}

// finish says in each workload's finding how many replicas stay Pending.
func (pl *pendingLog) finish() {
	for _, key := range pl.order {
		p := pl.byKey[key]
		if len(p.pods) < 2 {
			continue
		}
		names := p.pods
		if len(names) > 4 {
			names = append(append([]string(nil), names[:3]...), "…", names[len(names)-1])
		}
		f := &pl.report.Findings[p.finding]
		f.Message = fmt.Sprintf("%d replicas of %s stay Pending (%s); the first: %s", len(p.pods), p.owner, strings.Join(names, ", "), f.Message)
	}
}

// constraints checks the claim's matchAttribute and
// distinctAttribute constraints that cover this request alone.
func (ex *explainer) constraints(ce *claimEval, re *reqEval, nodes []string, need int64) string {
	base := re.name
	if i := strings.Index(base, "/"); i >= 0 {
		base = base[:i]
	}
	for ci, c := range ce.claim.Spec.Devices.Constraints {
		applies := len(c.Requests) == 0
		for _, n := range c.Requests {
			if n == base || n == re.name {
				applies = true
			}
		}
		if !applies {
			continue
		}
		var attr resourceapi.FullyQualifiedName
		distinct := false
		switch {
		case c.MatchAttribute != nil:
			attr = *c.MatchAttribute
		case c.DistinctAttribute != nil:
			attr, distinct = *c.DistinctAttribute, true
		default:
			continue
		}
		domain, name := splitQualified(resourceapi.QualifiedName(attr), "")
		bestNode, bestSize, bestGroups := "", -1, map[string]int{}
		for _, n := range nodes {
			groups := map[string]int{}
			for _, i := range ex.inv.onNode(n) {
				if !re.match[i] {
					continue
				}
				d := ex.inv.devices[i]
				if a, ok := d.attribute(domain, name); ok {
					groups[attrString(a)]++
				} else {
					groups["(no "+name+")"]++
				}
			}
			size := 0
			for k, v := range groups {
				if strings.HasPrefix(k, "(no ") {
					continue
				}
				if distinct {
					size++
				} else {
					size = max(size, v)
				}
			}
			if size > bestSize {
				bestNode, bestSize, bestGroups = n, size, groups
			}
		}
		if int64(bestSize) >= need {
			continue
		}
		var gs []string
		keys := sortedKeys(bestGroups)
		sort.SliceStable(keys, func(i, j int) bool { return scheduler.NaturalLess(keys[i], keys[j]) })
		for _, k := range keys {
			gs = append(gs, fmt.Sprintf("%s=%s: %d", name, k, bestGroups[k]))
		}
		if distinct {
			return fmt.Sprintf("constraints[%d] distinctAttribute %s cannot be met: needs %d devices with different values on one node; %s has %d distinct value(s) among the matching devices (%s)",
				ci, attr, need, bestNode, bestSize, strings.Join(gs, ", "))
		}
		return fmt.Sprintf("constraints[%d] matchAttribute %s cannot be met: needs %d devices with the same %s on one node; the largest group has %d (on %s: %s)",
			ci, attr, need, name, bestSize, bestNode, strings.Join(gs, ", "))
	}
	return ""
}

// counters checks whether the cheapest matching devices fit in the
// shared counters that are left on the best node.
func (ex *explainer) counters(re *reqEval, nodes []string, need int64) string {
	for _, n := range nodes {
		// Remaining counters per pool/set/counter on this node.
		remaining := map[string]map[string]int64{}
		consumers := map[string][]int64{} // counter key → consumption of each matching, free device
		uses := false
		for _, i := range ex.inv.onNode(n) {
			d := ex.inv.devices[i]
			for _, cc := range d.dev.ConsumesCounters {
				key := d.driver + "/" + d.pool + "/" + cc.CounterSet
				if remaining[key] == nil {
					remaining[key] = map[string]int64{}
					for cn, c := range ex.inv.counters[d.driver+"/"+d.pool][cc.CounterSet] {
						remaining[key][cn] = c.Value.Value()
					}
				}
				if !ex.inv.free(ex.state, i) {
					for cn, c := range cc.Counters {
						remaining[key][cn] -= c.Value.Value()
					}
					continue
				}
				if re.match[i] {
					uses = true
					for cn, c := range cc.Counters {
						consumers[key+"\x00"+cn] = append(consumers[key+"\x00"+cn], c.Value.Value())
					}
				}
			}
		}
		if !uses {
			return ""
		}
		exhausted := ""
		for _, k := range sortedKeys(consumers) {
			vals := consumers[k]
			sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
			if int64(len(vals)) < need {
				continue
			}
			var sum int64
			for _, v := range vals[:need] {
				sum += v
			}
			parts := strings.SplitN(k, "\x00", 2)
			left := remaining[parts[0]][parts[1]]
			if sum > left {
				exhausted = fmt.Sprintf("counters exhausted: %d device(s) need at least %s of counter %s in counter set %s, %s left on %s",
					need, qty(sum), parts[1], parts[0], qty(left), n)
				break
			}
		}
		if exhausted == "" {
			return "" // some node has room: not the counters
		}
		if n == nodes[len(nodes)-1] {
			if held := ex.wholeGPUsHeld(n, re); held != "" {
				return held
			}
			if held := ex.countersHeld(n, re); held != "" {
				return held + " (" + exhausted + ")"
			}
			return exhausted
		}
	}
	return ""
}

// wholeGPUsHeld says, when the request matches whole GPUs and earlier
// claims hold every one of them on the node, that they are all held and
// by whom: the free MIG partitions a broad class also matches draw from
// the held GPUs' counters, and naming only those counters (or the one GPU
// whose partitions are published) would hide that all N GPUs are taken.
// "" when some matching whole GPU is free, or none matches.
func (ex *explainer) wholeGPUsHeld(node string, re *reqEval) string {
	var held []string
	total := 0
	for _, i := range ex.inv.onNode(node) {
		d := ex.inv.devices[i]
		if !re.match[i] {
			continue
		}
		if a, ok := d.dev.Attributes[slicebuilder.AttrType]; !ok || a.StringValue == nil || *a.StringValue != slicebuilder.TypeGPU {
			continue
		}
		total++
		if ex.inv.free(ex.state, i) {
			return ""
		}
		for _, h := range ex.state.Holders(d.id) {
			held = append(held, fmt.Sprintf("%s (%s)", h, d.name))
		}
	}
	if total == 0 {
		return ""
	}
	sort.SliceStable(held, func(i, j int) bool { return scheduler.NaturalLess(held[i], held[j]) })
	if len(held) > 8 {
		held = append(held[:7:7], fmt.Sprintf("… (%d in all)", len(held)))
	}
	which := fmt.Sprintf("all %d whole GPUs on %s are held by earlier claims", total, node)
	if total == 1 {
		which = fmt.Sprintf("the one whole GPU on %s is held by an earlier claim", node)
	}
	return fmt.Sprintf("%s: %s; the free MIG partitions the request also matches draw from those GPUs' counters, which a GPU held whole uses up, so none of them fits", which, strings.Join(held, ", "))
}

// countersHeld says, when every free device the request matches on the
// node draws from counter sets that earlier claims' devices use up, which
// claims hold them: a 9th claim of a class that matches whole GPUs and
// MIG partitions of eight GPUs finds the GPUs held whole, and every
// partition drawing from a held GPU's counters. "" when some set is free.
func (ex *explainer) countersHeld(node string, re *reqEval) string {
	holders := map[string][]string{} // counter set → "claim (device)"
	sets := map[string]bool{}        // the sets the free matching devices draw from
	for _, i := range ex.inv.onNode(node) {
		d := ex.inv.devices[i]
		for _, cc := range d.dev.ConsumesCounters {
			key := d.driver + "/" + d.pool + "/" + cc.CounterSet
			switch {
			case !ex.inv.free(ex.state, i):
				for _, h := range ex.state.Holders(d.id) {
					holders[key] = append(holders[key], fmt.Sprintf("%s (%s)", h, d.name))
				}
			case re.match[i]:
				sets[key] = true
			}
		}
	}
	var parts []string
	for _, key := range sortedKeys(sets) {
		if len(holders[key]) == 0 {
			return ""
		}
		parts = append(parts, strings.Join(holders[key], ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	sort.SliceStable(parts, func(i, j int) bool { return scheduler.NaturalLess(parts[i], parts[j]) })
	if len(parts) > 4 {
		parts = append(parts[:3:3], fmt.Sprintf("… (%d in all)", len(parts)))
	}
	which := fmt.Sprintf("all %d GPUs (counter sets) the matching free devices draw from are held by earlier claims", len(sets))
	if len(sets) == 1 {
		which = "the one GPU (counter set) the matching free devices draw from is held by an earlier claim"
	}
	return fmt.Sprintf("%s: %s; a GPU held whole uses all of its counters, so none of its free partitions fits", which, strings.Join(parts, "; "))
}

// finish orders the findings and sets the exit code.
func (r *runner) finish() {
	r.pending.finish()
	if r.report.Findings == nil {
		r.report.Findings = []Finding{}
	}
	r.report.Stats.Compiled = r.eval.compiler.compiled
	sort.SliceStable(r.report.Claims, func(i, j int) bool {
		a, b := r.report.Claims[i].Source, r.report.Claims[j].Source
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Document < b.Document
	})
	r.report.ExitCode = ExitCode(r.report, nil)
}

func qty(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

// classSelects says whether a class's selectors mention text (a value
// they compare with).
func (ev *evaluator) classSelects(class, text string) bool {
	ce := ev.classes[class]
	if ce == nil {
		return false
	}
	for _, s := range ce.obj.Spec.Selectors {
		if s.CEL != nil && strings.Contains(s.CEL.Expression, text) {
			return true
		}
	}
	return false
}

// freeFor says whether device i has room for one allocation of the
// request: it is not held, or it allows multiple allocations and what
// earlier claims consume leaves the request's share of every capacity
// with a request policy (what it asks for, or the policy's default).
func (ex *explainer) freeFor(i int, re *reqEval) bool {
	d := ex.inv.devices[i]
	if m := d.dev.AllowMultipleAllocations; m == nil || !*m {
		return ex.inv.free(ex.state, i)
	}
	consumed := ex.state.Consumed(d.id)
	for name, c := range d.dev.Capacity {
		if c.RequestPolicy == nil || c.RequestPolicy.Default == nil {
			continue
		}
		want := *c.RequestPolicy.Default
		for q, v := range re.capacity {
			if _, id := splitQualified(q, ex.opts.DriverName); id == string(name) {
				want = v
			}
		}
		left := c.Value.DeepCopy()
		if used, ok := consumed[name]; ok {
			left.Sub(used)
		}
		if want.Cmp(left) > 0 {
			return false
		}
	}
	return true
}
