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

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// classHintFor says, for a class name no DeviceClass has, which one was
// probably meant and which there are.
func (ev *evaluator) classHintFor(class string) string {
	names := sortedKeys(ev.known)
	h := didYouMean(class, names)
	if why, ok := vendorClassesWithoutEquivalent[class]; ok {
		return why
	}
	// Another driver's class has one equivalent, or none: naming it alone
	// says what to write, where the list of every gpudra class would
	// leave the user to guess among thirty.
	if ours, ok := vendorClasses[class]; ok {
		ours = builtinClassName(strings.ReplaceAll(ours, gpu.DefaultDriverName, ev.opts.DriverName), ev.opts.DriverName)
		h = fmt.Sprintf("%s is another driver's class; gpudra's class for these devices is %s", class, ours)
		if _, known := ev.known[ours]; !known && !strings.HasPrefix(ours, "nvlink-") && !ev.opts.BuiltinClasses {
			h += " (gpudra's chart installs it; check knows it with --builtin-classes)"
		}
		return h
	}
	if strings.HasSuffix(class, ".nvidia.com") {
		gpus := builtinClassName(strings.ReplaceAll("gpu.gpudra.io", gpu.DefaultDriverName, ev.opts.DriverName), ev.opts.DriverName)
		migs := builtinClassName(strings.ReplaceAll("mig.gpudra.io", gpu.DefaultDriverName, ev.opts.DriverName), ev.opts.DriverName)
		return fmt.Sprintf("%s is named like a class of NVIDIA's driver; gpudra has no equivalent of it (gpudra's classes for whole GPUs and for MIG partitions are %s and %s)", class, gpus, migs)
	}
	var mine, builtin []string
	for _, n := range names {
		if ev.builtin[n] {
			builtin = append(builtin, n)
		} else {
			mine = append(mine, n)
		}
	}
	if len(mine) > 0 {
		h += "classes in the inputs: " + strings.Join(mine, ", ") + "; "
	}
	if len(builtin) > 0 {
		h += "gpudra's classes: " + strings.Join(builtin, ", ")
	} else if !ev.opts.BuiltinClasses {
		h += "gpudra's own classes are not known without --builtin-classes"
	}
	return strings.TrimSuffix(h, "; ")
}

// checkCapacityRequests reports capacity requests (consumable capacity) of
// a request that no device in the inventory can meet: the allocator finds
// no device, and the reason is the capacity, not the constraints.
func (ev *evaluator) checkCapacityRequests(re *reqEval, src scheduler.Source, object, field string) {
	for _, name := range sortedKeys(re.capacity) {
		q := re.capacity[resourceapi.QualifiedName(name)]
		domain, id := splitQualified(resourceapi.QualifiedName(name), ev.opts.DriverName)
		caps, ok := ev.inv.caps[domain]
		f := Finding{Kind: FindingUnknownCapacity, Source: src, Object: object, Field: field + "[" + name + "]"}
		switch {
		case !ok:
			f.Message = fmt.Sprintf("the request asks for capacity %s, but no device in the inventory has capacity in domain %s: no device can be allocated for it", name, domain)
			f.Hint = didYouMean(domain, sortedKeys(ev.inv.caps)) + "capacity domains: " + strings.Join(sortedKeys(ev.inv.caps), ", ")
		default:
			if _, has := caps[id]; has {
				if max := ev.maxCapacity(domain, id, re.classHits); max != nil && max.Cmp(q) < 0 {
					f.Message = fmt.Sprintf("the request asks for %s of capacity %s, but the devices its class matches have at most %s: no device can be allocated for it", q.String(), name, max.String())
					ev.findings.add(f)
				}
				continue
			}
			f.Message = fmt.Sprintf("the request asks for capacity %s, which no device in the inventory has: no device can be allocated for it", name)
			f.Hint = didYouMean(id, sortedKeys(caps)) + "capacities in " + domain + ": " + strings.Join(sortedKeys(caps), ", ")
		}
		ev.findings.add(f)
	}
}

// maxCapacity is the largest value of a capacity among the devices in
// scope (nil when none has it).
func (ev *evaluator) maxCapacity(domain, name string, scope []bool) *resource.Quantity {
	var max *resource.Quantity
	for i, d := range ev.inv.devices {
		if scope != nil && !scope[i] {
			continue
		}
		if c, ok := d.capacity(domain, name); ok && (max == nil || c.Value.Cmp(*max) > 0) {
			v := c.Value
			max = &v
		}
	}
	return max
}

// explainSelectors says why a request's selectors keep none of the devices
// its class matches: which selector keeps none (or that only their
// combination does), and which values the devices have for what the
// selectors read.
func (ev *evaluator) explainSelectors(re *reqEval, classCount int) string {
	msg := fmt.Sprintf("DeviceClass %s matches %d device(s), but", re.class, classCount)
	var zero, some []string
	var refs []celRef
	for i, n := range re.selCounts {
		if n == 0 {
			zero = append(zero, fmt.Sprintf("selectors[%d]", i))
			if i < len(re.selectors) {
				refs = append(refs, re.selectors[i].refs...)
			}
		} else {
			some = append(some, fmt.Sprintf("selectors[%d] keeps %d", i, n))
		}
	}
	switch {
	case len(zero) > 0:
		msg += fmt.Sprintf(" %s keeps none of them", strings.Join(zero, " and "))
		if len(some) > 0 {
			msg += " (" + strings.Join(some, ", ") + ")"
		}
	default:
		msg += fmt.Sprintf(" no device passes all the request's selectors (%s)", strings.Join(some, ", "))
		for _, s := range re.selectors {
			refs = append(refs, s.refs...)
		}
	}
	if v := ev.valuesOf(refs, re.classHits); v != "" {
		msg += "; the devices have " + v
	}
	if re.selErrors > 0 {
		msg += fmt.Sprintf("; evaluation fails on %d of them, and the scheduler stops with that error instead of skipping the device", re.selErrors)
	}
	return msg
}

// valuesOf lists, for each attribute and capacity refs read, the distinct
// values the devices in scope have, the most common first (at most four,
// with counts), so that a selector matching nothing shows what it could
// have matched.
func (ev *evaluator) valuesOf(refs []celRef, scope []bool) string {
	var parts []string
	seen := map[string]bool{}
	for _, ref := range refs {
		key := ref.what + "\x00" + ref.domain + "\x00" + ref.name
		if ref.what == "driver" || ref.domainOnly || seen[key] {
			continue
		}
		seen[key] = true
		counts := map[string]int{}
		missing := 0
		for i, d := range ev.inv.devices {
			if scope != nil && !scope[i] {
				continue
			}
			switch ref.what {
			case "attributes":
				if a, ok := d.attribute(ref.domain, ref.name); ok {
					v := attrString(a)
					if a.StringValue != nil {
						v = "'" + v + "'"
					}
					counts[v]++
					continue
				}
			case "capacity":
				if c, ok := d.capacity(ref.domain, ref.name); ok {
					counts[c.Value.String()]++
					continue
				}
			}
			missing++
		}
		switch {
		case len(counts) == 0 && missing == 0:
			continue
		case len(counts) == 0:
			what := "attribute"
			if ref.what == "capacity" {
				what = "capacity"
			}
			parts = append(parts, fmt.Sprintf("no %s %s/%s (none of the %d has it)", what, ref.domain, ref.name, missing))
			continue
		}
		values := sortedKeys(counts)
		sort.SliceStable(values, func(i, j int) bool {
			if counts[values[i]] != counts[values[j]] {
				return counts[values[i]] > counts[values[j]]
			}
			return scheduler.NaturalLess(values[i], values[j])
		})
		var vs []string
		for _, v := range values[:min(4, len(values))] {
			vs = append(vs, fmt.Sprintf("%s ×%d", v, counts[v]))
		}
		if len(values) > 4 {
			vs = append(vs, fmt.Sprintf("… (%d values in all)", len(values)))
		}
		if missing > 0 {
			vs = append(vs, fmt.Sprintf("and %d have no %s", missing, ref.name))
		}
		parts = append(parts, ref.name+" "+strings.Join(vs, ", "))
	}
	return strings.Join(parts, "; ")
}

// capacity says why a request's capacity requests rule out every
// matching device: none has that capacity, or enough of it, or (in
// sequence) enough of it left beside what earlier claims consume.
func (ex *explainer) capacity(re *reqEval) string {
	for _, name := range sortedKeys(re.capacity) {
		want := re.capacity[resourceapi.QualifiedName(name)]
		domain, id := splitQualified(resourceapi.QualifiedName(name), ex.opts.DriverName)
		max := ex.eval.maxCapacity(domain, id, re.match)
		switch {
		case max == nil:
			return fmt.Sprintf("it asks for capacity %s, which none of the %d matching device(s) has", name, countTrue(re.match))
		case max.Cmp(want) < 0:
			return fmt.Sprintf("it asks for %s of capacity %s, and the matching devices have at most %s", want.String(), name, max.String())
		}
		var left *resource.Quantity
		holders := map[string]bool{}
		for i, d := range ex.inv.devices {
			c, ok := d.capacity(domain, id)
			if !re.match[i] || !ok {
				continue
			}
			v := c.Value.DeepCopy()
			consumed := ex.state.Consumed(d.id)
			used, ok := consumed[resourceapi.QualifiedName(name)]
			if !ok {
				used, ok = consumed[resourceapi.QualifiedName(id)]
			}
			if ok {
				v.Sub(used)
				for _, h := range ex.state.Holders(d.id) {
					holders[h] = true
				}
			}
			if left == nil || v.Cmp(*left) > 0 {
				left = &v
			}
		}
		if left != nil && left.Cmp(want) < 0 {
			return fmt.Sprintf("it asks for %s of capacity %s, and the matching devices have at most %s left; earlier claims consume the rest (%s)", want.String(), name, left.String(), strings.Join(sortedKeys(holders), ", "))
		}
	}
	return ""
}

// checkConstraints reports matchAttribute and distinctAttribute names no
// device publishes: a device without the attribute never satisfies the
// constraint, so the requests it covers are never allocated.
func (ev *evaluator) checkConstraints(ce *claimEval) {
	if len(ev.inv.devices) == 0 {
		return
	}
	for i, c := range ce.claim.Spec.Devices.Constraints {
		field, attr := fmt.Sprintf("%s.devices.constraints[%d].matchAttribute", ce.field, i), c.MatchAttribute
		if attr == nil {
			field, attr = fmt.Sprintf("%s.devices.constraints[%d].distinctAttribute", ce.field, i), c.DistinctAttribute
		}
		if attr == nil || !strings.Contains(string(*attr), "/") || strings.HasPrefix(string(*attr), "/") || strings.HasSuffix(string(*attr), "/") {
			continue // the API server rejects it, as internal/scheduler reports
		}
		domain, name := splitQualified(resourceapi.QualifiedName(*attr), "")
		names, known := ev.inv.attrs[domain]
		if _, ok := names[name]; ok || !ev.anyMatch(ce, c.Requests) {
			// Known, or moot: requests that match no device are
			// explained as such.
			continue
		}
		f := Finding{Kind: FindingUnknownAttribute, Source: ce.source, Object: ce.object, Field: field}
		f.Message = fmt.Sprintf("no device in the inventory publishes attribute %s: a device without it never satisfies the constraint, so the requests it covers can never be allocated", *attr)
		switch {
		case !known:
			f.Hint = didYouMean(domain, sortedKeys(ev.inv.attrs)) + "attribute domains: " + strings.Join(sortedKeys(ev.inv.attrs), ", ") + "; a constraint names domain/attribute"
		default:
			if _, isCap := ev.inv.caps[domain][name]; isCap {
				f.Hint = fmt.Sprintf("%s is a capacity; constraints compare attributes. ", name)
			}
			f.Hint += didYouMean(name, sortedKeys(names)) + "published in " + domain + ": " + strings.Join(sortedKeys(names), ", ")
		}
		ev.findings.add(f)
	}
}

// anyMatch says whether any of the named requests of a claim (all, when
// none is named) matches a device.
func (ev *evaluator) anyMatch(ce *claimEval, names []string) bool {
	var walk func(re *reqEval) bool
	walk = func(re *reqEval) bool {
		for _, s := range re.sub {
			if walk(s) {
				return true
			}
		}
		return countTrue(re.match) > 0
	}
	for _, re := range ce.reqs {
		if len(names) == 0 || slices.Contains(names, re.name) {
			if walk(re) {
				return true
			}
		}
	}
	return false
}
