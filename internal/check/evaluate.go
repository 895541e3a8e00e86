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
	"regexp"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/spelling"
)

// addSelector compiles one expression, checks it against the API server's
// limits and the inventory, and evaluates it on every device.
func (ev *evaluator) addSelector(src scheduler.Source, object, field, expr string) *selector {
	ev.report.Stats.Expressions++
	ev.report.Selectors = append(ev.report.Selectors, SelectorInfo{Source: src.At(field), Object: object, Field: src.Field(field), Expression: expr})
	// The report's slice may grow later; the selector keeps an index.
	s := &selector{source: src, infoIndex: len(ev.report.Selectors) - 1}
	info := &ev.report.Selectors[s.infoIndex]
	at := Finding{Source: src, Object: object, Field: field, Expression: expr}
	if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
		info.Error = fmt.Sprintf("longer than %d characters", resourceapi.CELSelectorExpressionMaxLength)
		f := at
		f.Kind, f.Message = FindingTooLong, fmt.Sprintf("the expression is %d characters long; the API server accepts at most %d", len(expr), resourceapi.CELSelectorExpressionMaxLength)
		ev.findings.add(f)
		return s
	}
	s.result = ev.compiler.compile(expr)
	if s.result.Error != nil {
		info.Error = s.result.Error.Detail
		f := at
		f.Kind, f.Message = FindingCompile, s.result.Error.Detail
		f.Hint = compileHint(s.result.Error.Detail)
		// A type error often comes from a name used as the domain:
		// device.capacity['memory'].compareTo(...) reads a map.
		for _, ref := range parsedRefs(expr) {
			if _, hint, ok := ev.domainProblem(ref); ok && ref.domainOnly {
				f.Hint = fmt.Sprintf("device.%s['%s'] is the map of the %s in domain %q, not a value: %s", ref.what, ref.domain, map[string]string{"attributes": "attributes", "capacity": "capacities"}[ref.what], ref.domain, hint)
				break
			}
		}
		ev.findings.add(f)
		return s
	}
	info.Type = s.result.OutputType.String()
	info.Cost = s.result.MaxCost
	if s.result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		f := at
		f.Kind = FindingCostLimit
		f.Message = fmt.Sprintf("too complex: estimated worst-case cost %d exceeds the limit of %d", s.result.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
		f.Hint = "the API server rejects this object; avoid comprehensions over attributes or long string operations"
		ev.findings.add(f)
		return s
	}
	s.ok = true
	ev.compiler.analyze(s)
	ev.checkRefs(s, at)
	for _, v := range s.badVersions {
		f := at
		f.Kind, f.Caret = FindingInvalidVersion, caret(s, v.id)
		f.Message = fmt.Sprintf("semver('%s') is not a semantic version (MAJOR.MINOR.PATCH, no leading v or zeros): the call fails at run time, so the selector fails on every device it is evaluated on", v.text)
		f.Hint = fmt.Sprintf("write semver(%s), or semver('%s', true) to have it normalized", quoteSemver(strings.TrimPrefix(v.text, "v")), v.text)
		ev.findings.add(f)
	}
	return s
}

func compileHint(detail string) string {
	switch {
	case strings.Contains(detail, "undeclared reference to 'version'"):
		return "DRA's CEL has no version(): parse a version with semver('8.0.0') (semver('8.0', true) normalizes a short one) and compare with isGreaterThan, isLessThan or compareTo"
	case strings.Contains(detail, "undeclared reference"):
		return "a selector sees only `device` (device.driver, device.attributes[domain].name, device.capacity[domain].name); strings are quoted"
	case strings.Contains(detail, "found no matching overload"):
		return "check the operand types: versions compare with semver('1.2.3'), quantities with quantity('40Gi') and compareTo"
	case strings.Contains(detail, "must evaluate to bool"):
		return "a selector must be a boolean expression"
	}
	return ""
}

// checkRefs reports the attributes, capacities and drivers the expression
// names that the inventory does not have.
func (ev *evaluator) checkRefs(s *selector, at Finding) {
	inv := ev.inv
	if len(inv.devices) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, ref := range s.refs {
		key := ref.what + "\x00" + ref.domain + "\x00" + ref.name
		if seen[key] {
			continue
		}
		seen[key] = true
		f := at
		f.Caret = caret(s, ref.id)
		if ref.domainOnly {
			ev.checkDomain(f, ref)
			continue
		}
		switch ref.what {
		case "driver":
			ev.checkDriverRef(f, ref)
		case "attributes":
			ev.checkAttributeRef(f, ref)
		case "capacity":
			ev.checkCapacityRef(f, ref)
		}
	}
}

// checkDriverRef reports a device.driver comparison with a driver no
// slice of the inventory carries.
func (ev *evaluator) checkDriverRef(f Finding, ref celRef) {
	inv := ev.inv
	if !inv.drivers[ref.name] {
		f.Kind = FindingUnknownDriver
		f.Message = fmt.Sprintf("no ResourceSlice in the inventory carries driver %q (drivers: %s)", ref.name, strings.Join(sortedKeys(inv.drivers), ", "))
		f.Hint = didYouMean(ref.name, sortedKeys(inv.drivers)) + "the driver name is the one the plugin runs with (--driver-name)"
		ev.findings.add(f)
	}
}

// checkAttributeRef reports a device.attributes reference the inventory
// does not publish (a capacity, an unknown domain or name), and checks
// the comparisons of one it does.
func (ev *evaluator) checkAttributeRef(f Finding, ref celRef) {
	inv := ev.inv
	names, known := inv.attrs[ref.domain]
	if !known && !inv.drivers[ref.domain] {
		f.Kind = FindingUnknownDriver
		f.Message = fmt.Sprintf("device.attributes['%s']: no device in the inventory has attributes in domain %q (domains: %s)", ref.domain, ref.domain, strings.Join(sortedKeys(inv.attrs), ", "))
		f.Hint = didYouMean(ref.domain, sortedKeys(inv.attrs)) + "unqualified attributes live in the driver's domain, the driver name"
		for _, v := range vendorAPIs {
			if v.driver == ref.domain {
				f.Hint = fmt.Sprintf("%s is the domain of %s; gpudra publishes its attributes in %s (gpudra migrate rewrites the selectors)", ref.domain, v.who, ev.opts.DriverName)
			}
		}
		ev.findings.add(f)
		return
	}
	if typ, ok := names[ref.name]; ok {
		ev.checkComparison(f, ref, typ)
		return
	}
	if _, ok := inv.caps[ref.domain][ref.name]; ok {
		f.Kind = FindingCapacityAsAttribute
		f.Message = fmt.Sprintf("%s is a capacity, not an attribute: device.attributes['%s'].%s does not exist on any device", ref.name, ref.domain, ref.name)
		f.Hint = fmt.Sprintf("use device.capacity['%s'].%s, a quantity: device.capacity['%s'].%s.compareTo(quantity('40Gi')) >= 0", ref.domain, ref.name, ref.domain, ref.name)
		ev.findings.add(f)
		return
	}
	f.Kind = FindingUnknownAttribute
	f.Message = fmt.Sprintf("no device in the inventory publishes attribute %s/%s", ref.domain, ref.name)
	f.Hint = didYouMean(ref.name, sortedKeys(names)) + "published in " + ref.domain + ": " + strings.Join(sortedKeys(names), ", ")
	if to, ok := renamedAttributes[ref.name]; ok {
		f.Hint = to + "; " + f.Hint
	}
	if !ref.testOnly {
		f.Hint += "; on devices without it the selector fails with \"no such key\""
	}
	ev.findings.add(f)
}

// checkCapacityRef reports a device.capacity reference the inventory
// does not publish (an attribute, an unknown domain or name).
func (ev *evaluator) checkCapacityRef(f Finding, ref celRef) {
	inv := ev.inv
	if _, ok := inv.caps[ref.domain][ref.name]; ok {
		return
	}
	if _, ok := inv.attrs[ref.domain][ref.name]; ok {
		f.Kind = FindingAttributeAsCapacity
		f.Message = fmt.Sprintf("%s is an attribute, not a capacity: device.capacity['%s'].%s does not exist on any device", ref.name, ref.domain, ref.name)
		f.Hint = fmt.Sprintf("use device.attributes['%s'].%s", ref.domain, ref.name)
		ev.findings.add(f)
		return
	}
	if _, ok := inv.caps[ref.domain]; !ok && !inv.drivers[ref.domain] {
		f.Kind = FindingUnknownDriver
		f.Message = fmt.Sprintf("device.capacity['%s']: no device in the inventory has capacity in domain %q (domains: %s)", ref.domain, ref.domain, strings.Join(sortedKeys(inv.caps), ", "))
		f.Hint = didYouMean(ref.domain, sortedKeys(inv.caps))
		ev.findings.add(f)
		return
	}
	f.Kind = FindingUnknownCapacity
	f.Message = fmt.Sprintf("no device in the inventory has capacity %s/%s", ref.domain, ref.name)
	f.Hint = didYouMean(ref.name, sortedKeys(inv.caps[ref.domain])) + "capacities in " + ref.domain + ": " + strings.Join(sortedKeys(inv.caps[ref.domain]), ", ")
	ev.findings.add(f)
}

// checkDomain reports device.attributes['x'] or device.capacity['x'] used
// without a name where x is no domain of the inventory.
func (ev *evaluator) checkDomain(f Finding, ref celRef) {
	msg, hint, ok := ev.domainProblem(ref)
	if !ok {
		return
	}
	f.Kind, f.Message, f.Hint = FindingMissingDomain, msg, hint
	ev.findings.add(f)
}

// domainProblem explains device.attributes['x'] or device.capacity['x']
// where x is no domain of the inventory: usually the name itself
// (device.capacity['memory']), or a qualified name used as one key
// (device.attributes['gpu.gpudra.io/productName']).
func (ev *evaluator) domainProblem(ref celRef) (msg, hint string, ok bool) {
	inv := ev.inv
	byDomain := inv.attrs
	other, otherWhat := inv.caps, "capacity"
	if ref.what == "capacity" {
		byDomain, other, otherWhat = inv.caps, inv.attrs, "attribute"
	}
	if _, ok := byDomain[ref.domain]; ok || inv.drivers[ref.domain] || len(inv.devices) == 0 {
		return "", "", false
	}
	plural := map[string]string{"attributes": "attributes", "capacity": "capacities"}[ref.what]
	if d, n, qualified := strings.Cut(ref.domain, "/"); qualified {
		return fmt.Sprintf("device.%s['%s'] uses a qualified name as one key; %s are looked up by domain, then by name", ref.what, ref.domain, plural),
			fmt.Sprintf("use device.%s['%s'].%s", ref.what, d, n), true
	}
	var in, inOther []string
	for _, d := range sortedKeys(byDomain) {
		if _, ok := byDomain[d][ref.domain]; ok {
			in = append(in, d)
		}
	}
	for _, d := range sortedKeys(other) {
		if _, ok := other[d][ref.domain]; ok {
			inOther = append(inOther, d)
		}
	}
	switch {
	case len(in) > 0:
		return fmt.Sprintf("device.%s['%s'] looks up %q as a domain, but it is a name in %s: %s are looked up by domain, then by name", ref.what, ref.domain, ref.domain, strings.Join(in, ", "), plural),
			fmt.Sprintf("use device.%s['%s'].%s", ref.what, in[0], ref.domain), true
	case len(inOther) > 0:
		otherField := map[string]string{"capacity": "attributes", "attributes": "capacity"}[ref.what]
		return fmt.Sprintf("device.%s['%s'] looks up %q as a domain; it is the name of a %s in %s", ref.what, ref.domain, ref.domain, otherWhat, strings.Join(inOther, ", ")),
			fmt.Sprintf("use device.%s['%s'].%s", otherField, inOther[0], ref.domain), true
	}
	return fmt.Sprintf("device.%s['%s']: no device in the inventory has %s in domain %q (domains: %s)", ref.what, ref.domain, plural, ref.domain, strings.Join(sortedKeys(byDomain), ", ")),
		didYouMean(ref.domain, sortedKeys(byDomain)) + "the domain of a driver's own " + plural + " is the driver name", true
}

// checkComparison reports an attribute compared with a literal of another
// type: `==` then silently never matches, `<` fails at run time.
func (ev *evaluator) checkComparison(f Finding, ref celRef, typ string) {
	if ref.compared == nil {
		return
	}
	lit := celTypeName(ref.compared)
	if lit == "" || lit == typ || typ == "list" {
		return
	}
	f.Kind = FindingTypeMismatch
	f.Message = fmt.Sprintf("%s/%s is a %s but is compared (%s) with the %s %s", ref.domain, ref.name, typ, ref.cmpOp, lit, ref.cmpLit)
	if ref.cmpOp == "==" || ref.cmpOp == "!=" {
		f.Message += ": values of different types are never equal, so this comparison is constant"
	} else {
		f.Message += ": evaluation fails with \"no such overload\" on every device"
	}
	switch typ {
	case "version":
		v := strings.Trim(ref.cmpLit, "'\"")
		f.Hint = fmt.Sprintf("compare versions with semver(): device.attributes['%s'].%s.compareTo(semver(%s)) >= 0, or .isGreaterThan(semver(...)); a version has three parts (%s)",
			ref.domain, ref.name, quoteSemver(v), quoteSemver(v))
	case "int":
		f.Hint = "compare with an integer literal, without quotes"
	case "bool":
		f.Hint = "compare with true or false, without quotes"
	case "string":
		f.Hint = "compare with a quoted string"
	}
	ev.findings.add(f)
}

func quoteSemver(v string) string {
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	return "'" + strings.Join(parts, ".") + "'"
}

// didYouMean is "did you mean "x"? " for the candidate closest to name,
// or "".
func didYouMean(name string, candidates []string) string {
	if c := spelling.Closest(name, candidates); c != "" {
		return fmt.Sprintf("did you mean %q? ", c)
	}
	return ""
}

// evaluate runs a compiled selector on every device in scope (all when
// scope is nil; for a request, the devices its class matches, as the
// scheduler does); devices whose relevant values equal those of an
// earlier device share its result. scopeKey names the scope for caching.
func (ev *evaluator) evaluate(s *selector, scope []bool, scopeKey string) *evalResult {
	cacheKey := s.result.Expression + "\x00" + scopeKey
	if res, ok := ev.evals[cacheKey]; ok {
		return res
	}
	res := &evalResult{match: make([]bool, len(ev.inv.devices)), errs: map[int]error{}}
	type outcome struct {
		ok  bool
		err error
	}
	memo := map[string]outcome{}
	for i, d := range ev.inv.devices {
		if scope != nil && !scope[i] {
			continue
		}
		key := ""
		if !s.dynamic {
			key = d.evalKey(s)
			if o, ok := memo[key]; ok {
				res.match[i] = o.ok
				if o.err != nil {
					res.errs[i] = o.err
				}
				ev.report.Stats.CachedEvals++
				continue
			}
		}
		ok, _, err := s.result.DeviceMatches(ev.ctx, d.input)
		ev.report.Stats.Evaluations++
		if err != nil {
			err = cel.EnhanceRuntimeError(err)
			ok = false
			res.errs[i] = err
		}
		res.match[i] = ok
		if !s.dynamic {
			memo[key] = outcome{ok, err}
		}
	}
	ev.evals[cacheKey] = res
	return res
}

// reportRuntimeErrors reports, per distinct message, the devices (among
// those in scope) on which a selector failed: the scheduler stops
// scheduling a pod when that happens.
func (ev *evaluator) reportRuntimeErrors(s *selector, res *evalResult, scope []bool, object, field, where string) {
	if len(res.errs) == 0 {
		return
	}
	byMsg := map[string][]int{}
	for i, err := range res.errs {
		if scope != nil && !scope[i] {
			continue
		}
		byMsg[err.Error()] = append(byMsg[err.Error()], i)
	}
	info := &ev.report.Selectors[s.infoIndex]
	for _, msg := range sortedKeys(byMsg) {
		idx := byMsg[msg]
		sort.Ints(idx)
		info.Errors += len(idx)
		f := Finding{Kind: FindingRuntimeError, Source: s.source, Object: object, Field: field, Expression: s.result.Expression}
		f.Message = fmt.Sprintf("evaluation fails on %d device(s)%s: %s", len(idx), where, msg)
		for _, i := range idx[:min(3, len(idx))] {
			f.Devices = append(f.Devices, ev.inv.devices[i].label())
		}
		f.Hint = runtimeHint(msg, s, ev.inv.devices[idx[0]])
		ev.findings.add(f)
	}
}

var noSuchKey = regexp.MustCompile(`no such key: ([^ .]+)`)

func runtimeHint(msg string, s *selector, d *device) string {
	switch {
	case len(s.badVersions) > 0 && strings.Contains(msg, "Major.Minor.Patch"):
		return fmt.Sprintf("semver('%s') is no semantic version: write semver(%s)", s.badVersions[0].text, quoteSemver(strings.TrimPrefix(s.badVersions[0].text, "v")))
	case strings.Contains(msg, "no such key"):
		what, domain, name := "attributes", "<domain>", "<name>"
		if m := noSuchKey.FindStringSubmatch(msg); m != nil {
			name = m[1]
			for _, ref := range s.refs {
				if ref.name == name && ref.what != "driver" {
					what, domain = ref.what, ref.domain
					break
				}
			}
		}
		return fmt.Sprintf("%s has no %s %s, and the scheduler stops with this error instead of skipping the device: guard the access with has(device.%s['%s'].%s) && …, or use device.%s['%s'].?%s.orValue(<default>), or select the kind of device first",
			d.label(), strings.TrimSuffix(what, "s"), name, what, domain, name, what, domain, name)
	case strings.Contains(msg, "no such overload"):
		var types []string
		for _, ref := range s.refs {
			if ref.what != "attributes" {
				continue
			}
			if a, ok := d.attribute(ref.domain, ref.name); ok {
				types = append(types, fmt.Sprintf("%s is a %s (%s)", ref.name, attributeTypeName(a), attrString(a)))
			}
		}
		h := "an operand has another type than the expression assumes"
		if len(types) > 0 {
			h += ": on " + d.label() + " " + strings.Join(types, ", ")
		}
		return h + "; versions compare with semver('9.0.0'), quantities with quantity('40Gi')"
	}
	return ""
}
