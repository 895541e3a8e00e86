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
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// class returns a known DeviceClass, checked and evaluated on every
// device on first use, or nil when the cluster would not have it.
func (ev *evaluator) class(name string) *classEval {
	if ce, ok := ev.classes[name]; ok {
		return ce
	}
	o, ok := ev.known[name]
	if !ok {
		return nil
	}
	dc := o.Obj.(*resourceapi.DeviceClass)
	ev.report.Classes = append(ev.report.Classes, ClassInfo{Name: dc.Name, Source: o.Source})
	info := len(ev.report.Classes) - 1
	ce := &classEval{obj: dc, source: o.Source, match: make([]bool, len(ev.inv.devices))}
	for i := range ce.match {
		ce.match[i] = true
	}
	object := "DeviceClass " + dc.Name
	for i, sel := range dc.Spec.Selectors {
		field := fmt.Sprintf("spec.selectors[%d].cel.expression", i)
		if sel.CEL == nil {
			ev.findings.add(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Field: fmt.Sprintf("spec.selectors[%d].cel", i), Message: "a selector needs cel"})
			ce.broken = true
			continue
		}
		s := ev.addSelector(o.Source, object, field, sel.CEL.Expression)
		ce.selectors = append(ce.selectors, s)
		if !s.ok {
			ce.broken = true
			continue
		}
		res := ev.evaluate(s, nil, "")
		ev.recordCounts(s, res, nil)
		ev.reportRuntimeErrors(s, res, nil, object, field, "")
		for j := range ce.match {
			ce.match[j] = ce.match[j] && res.match[j]
		}
	}
	if ce.broken {
		for j := range ce.match {
			ce.match[j] = false
		}
	}
	ev.classes[dc.Name] = ce
	ev.checkClassConfigs(o)
	ev.report.Classes[info].Matches = ev.matches(ce.match)
	if !ce.broken && len(ev.inv.devices) > 0 && ev.report.Classes[info].Matches.Count == 0 {
		ev.findings.add(Finding{Kind: FindingClassMatchesNothing, Source: o.Source, Object: object,
			Message: fmt.Sprintf("DeviceClass %s matches none of the %d devices in the inventory", dc.Name, len(ev.inv.devices)),
			Hint:    ev.classHint(ce)})
	}
	return ce
}

func (ev *evaluator) classHint(ce *classEval) string {
	var parts []string
	for i, s := range ce.selectors {
		if !s.ok {
			continue
		}
		res := ev.evaluate(s, nil, "")
		n := countTrue(res.match)
		parts = append(parts, fmt.Sprintf("selectors[%d] matches %d", i, n))
	}
	h := strings.Join(parts, ", ")
	var refs []celRef
	for _, s := range ce.selectors {
		refs = append(refs, s.refs...)
	}
	if v := ev.valuesOf(refs, nil); v != "" {
		h += "; the devices have " + v
	}
	return h
}

func (ev *evaluator) recordCounts(s *selector, res *evalResult, scope []bool) {
	info := &ev.report.Selectors[s.infoIndex]
	info.Devices, info.Matches = 0, 0
	for i, m := range res.match {
		if scope != nil && !scope[i] {
			continue
		}
		info.Devices++
		if m {
			info.Matches++
		}
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func (ev *evaluator) matches(m []bool) Matches {
	var out Matches
	nodes := map[string]bool{}
	last := ""
	for i, ok := range m {
		if !ok {
			continue
		}
		out.Count++
		// A node's devices are next to each other in the inventory: one
		// map write per run of them, not per device (a claim's matches
		// span the fleet).
		if n := ev.inv.devices[i].node; n != last || len(nodes) == 0 {
			nodes[n] = true
			last = n
		}
	}
	out.Nodes = len(nodes)
	if out.Count <= ev.opts.ListLimit {
		out.Devices = []string{}
		for i, ok := range m {
			if ok {
				out.Devices = append(out.Devices, ev.inv.devices[i].label())
			}
		}
	}
	return out
}
