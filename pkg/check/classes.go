package check

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

func (r *runner) checkClasses(objs []Object) {
	for _, o := range objs {
		dc := o.Obj.(*resourceapi.DeviceClass)
		r.report.Classes = append(r.report.Classes, ClassInfo{Name: dc.Name, Source: o.Source})
		ce := &classEval{obj: dc, source: o.Source, match: make([]bool, len(r.inv.devices))}
		for i := range ce.match {
			ce.match[i] = true
		}
		object := "DeviceClass " + dc.Name
		r.unusedClass = len(r.used) > 0 && !r.used[dc.Name]
		for i, sel := range dc.Spec.Selectors {
			field := fmt.Sprintf("spec.selectors[%d].cel.expression", i)
			if sel.CEL == nil {
				r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Field: fmt.Sprintf("spec.selectors[%d].cel", i), Message: "a selector needs cel"})
				ce.broken = true
				continue
			}
			s := r.addSelector(o.Source, object, field, sel.CEL.Expression)
			ce.selectors = append(ce.selectors, s)
			if !s.ok {
				ce.broken = true
				continue
			}
			res := r.evaluate(s, nil, "")
			r.recordCounts(s, res, nil)
			r.reportRuntimeErrors(s, res, nil, object, field, "")
			for j := range ce.match {
				ce.match[j] = ce.match[j] && res.match[j]
			}
		}
		if ce.broken {
			for j := range ce.match {
				ce.match[j] = false
			}
		}
		if _, dup := r.classes[dc.Name]; dup {
			r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Message: "DeviceClass defined twice; the later one is used"})
		}
		r.classes[dc.Name] = ce
		r.report.Classes[len(r.report.Classes)-1].Matches = r.matches(ce.match)
		if !ce.broken && len(r.inv.devices) > 0 && r.report.Classes[len(r.report.Classes)-1].Matches.Count == 0 {
			r.addFinding(Finding{Kind: FindingClassMatchesNothing, Source: o.Source, Object: object,
				Message: fmt.Sprintf("DeviceClass %s matches none of the %d devices in the inventory", dc.Name, len(r.inv.devices)),
				Hint:    r.classHint(ce)})
		}
	}
	r.unusedClass = false
	r.lister = classLister{classes: r.classes}
}

func (r *runner) classHint(ce *classEval) string {
	var parts []string
	for i, s := range ce.selectors {
		if !s.ok {
			continue
		}
		res := r.evaluate(s, nil, "")
		n := countTrue(res.match)
		parts = append(parts, fmt.Sprintf("selectors[%d] matches %d", i, n))
	}
	return strings.Join(parts, ", ")
}

func (r *runner) recordCounts(s *selector, res *evalResult, scope []bool) {
	info := &r.report.Selectors[s.infoIndex]
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

func (r *runner) matches(m []bool) Matches {
	var out Matches
	nodes := map[string]bool{}
	for i, ok := range m {
		if !ok {
			continue
		}
		out.Count++
		nodes[r.inv.devices[i].node] = true
	}
	out.Nodes = len(nodes)
	if out.Count <= r.opts.ListLimit {
		out.Devices = []string{}
		for i, ok := range m {
			if ok {
				out.Devices = append(out.Devices, r.inv.devices[i].label())
			}
		}
	}
	return out
}

// classLister serves the checked DeviceClasses to the allocator.
type classLister struct{ classes map[string]*classEval }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.classes))
	for _, name := range sortedKeys(l.classes) {
		out = append(out, l.classes[name].obj)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.classes[name]; ok {
		return c.obj, nil
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}
