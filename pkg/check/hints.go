package check

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/pkg/scheduler"
)

// classHintFor says, for a class name no DeviceClass has, which one was
// probably meant and which there are.
func (r *runner) classHintFor(class string) string {
	names := sortedKeys(r.known)
	h := didYouMean(class, names)
	var mine, builtin []string
	for _, n := range names {
		if r.builtin[n] {
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
	} else if !r.opts.BuiltinClasses {
		h += "gpudra's own classes are not known without --builtin-classes"
	}
	return strings.TrimSuffix(h, "; ")
}

// checkCapacityRequests reports capacity requests (consumable capacity) of
// a request that no device in the inventory can meet: the allocator finds
// no device, and the reason is the capacity, not the constraints.
func (r *runner) checkCapacityRequests(re *reqEval, src scheduler.Source, object, field string) {
	for _, name := range sortedKeys(re.capacity) {
		q := re.capacity[resourceapi.QualifiedName(name)]
		domain, id := splitQualified(resourceapi.QualifiedName(name), r.opts.DriverName)
		caps, ok := r.inv.caps[domain]
		f := Finding{Kind: FindingUnknownCapacity, Source: src, Object: object, Field: field + "[" + name + "]"}
		switch {
		case !ok:
			f.Message = fmt.Sprintf("the request asks for capacity %s, but no device in the inventory has capacity in domain %s: no device can be allocated for it", name, domain)
			f.Hint = didYouMean(domain, sortedKeys(r.inv.caps)) + "capacity domains: " + strings.Join(sortedKeys(r.inv.caps), ", ")
		default:
			if _, has := caps[id]; has {
				if max := r.maxCapacity(domain, id, re.classHits); max != nil && max.Cmp(q) < 0 {
					f.Message = fmt.Sprintf("the request asks for %s of capacity %s, but the devices its class matches have at most %s: no device can be allocated for it", q.String(), name, max.String())
					r.addFinding(f)
				}
				continue
			}
			f.Message = fmt.Sprintf("the request asks for capacity %s, which no device in the inventory has: no device can be allocated for it", name)
			f.Hint = didYouMean(id, sortedKeys(caps)) + "capacities in " + domain + ": " + strings.Join(sortedKeys(caps), ", ")
		}
		r.addFinding(f)
	}
}

// maxCapacity is the largest value of a capacity among the devices in
// scope (nil when none has it).
func (r *runner) maxCapacity(domain, name string, scope []bool) *resource.Quantity {
	var max *resource.Quantity
	for i, d := range r.inv.devices {
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
