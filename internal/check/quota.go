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
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// ResourceQuotas on DeviceClass devices, as the API server's quota
// admission charges ResourceClaims (k8s.io/kubernetes 1.37
// pkg/quota/v1/evaluator/core/resource_claims.go): every claim counts as
// one count/resourceclaims.resource.k8s.io, and each request as its count
// of <class>.deviceclass.resource.k8s.io/devices (allocationMode All as
// the most a claim can get, a firstAvailable request as its largest
// subrequest of each class); with DRAExtendedResource the same devices
// are also charged as requests.deviceclass.resource.kubernetes.io/<class>
// and requests.<the class's extendedResourceName>, except for the claim
// the scheduler makes for a pod's extended resources, which the pod's own
// requests pay for. A claim that would take the namespace's usage past a
// quota's spec.hard is refused at creation: kubectl apply fails for a
// ResourceClaim; the resourceclaim controller (a template's claim) or the
// scheduler (the extended-resource claim) cannot create it, and the pod
// stays Pending. Scoped quotas never match claims (the evaluator has no
// scopes), and check knows only the inputs' claims, not what the
// namespace already holds.

// claimCountQuota is the object count quota of ResourceClaims.
const claimCountQuota = v1.ResourceName("count/resourceclaims.resource.k8s.io")

// quotaChecker charges claims against the inputs' ResourceQuotas. It
// owns nothing across calls: the usage it counts lives for one check.
type quotaChecker struct {
	feats    scheduler.Features
	report   *Report
	findings *findingLog
	// known are the DeviceClasses the cluster would have (extended
	// resource names).
	known map[string]scheduler.Object
}

// quotaLimit is one spec.hard entry of an unscoped ResourceQuota.
type quotaLimit struct {
	quota scheduler.Object
	name  v1.ResourceName
	hard  int64
}

// check charges the units' claims, in order, against the inputs'
// ResourceQuotas of their namespace, and marks those the API server
// refuses to create.
func (qc *quotaChecker) check(quotas []scheduler.Object, units []*unit) {
	limits := map[string][]quotaLimit{} // by namespace
	for _, o := range quotas {
		q := o.Obj.(*v1.ResourceQuota)
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue
		}
		names := make([]v1.ResourceName, 0, len(q.Spec.Hard))
		for name := range q.Spec.Hard {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
		for _, name := range names {
			hard := q.Spec.Hard[name]
			limits[q.Namespace] = append(limits[q.Namespace], quotaLimit{quota: o, name: name, hard: hard.Value()})
		}
	}
	if len(limits) == 0 {
		return
	}
	type charge struct {
		ce    *claimEval
		unit  *unit
		usage map[v1.ResourceName]int64
	}
	var charges []charge
	total := map[string]map[v1.ResourceName]int64{}
	seen := map[*claimEval]bool{}
	for _, u := range units {
		claims := u.claims
		if u.extended != nil {
			claims = append(claims[:len(claims):len(claims)], u.extended)
		}
		for _, ce := range claims {
			// A template no pod uses makes no claim.
			from := qc.report.Claims[ce.idx].From
			if seen[ce] || limits[ce.claim.Namespace] == nil || u.pod == "" && from != "ResourceClaim" {
				continue
			}
			seen[ce] = true
			usage := qc.claimQuotaUsage(ce.claim, ce == u.extended)
			charges = append(charges, charge{ce, u, usage})
			if total[ce.claim.Namespace] == nil {
				total[ce.claim.Namespace] = map[v1.ResourceName]int64{}
			}
			for name, n := range usage {
				total[ce.claim.Namespace][name] += n
			}
		}
	}
	used := map[string]map[v1.ResourceName]int64{}
	for _, c := range charges {
		ns := c.ce.claim.Namespace
		if used[ns] == nil {
			used[ns] = map[v1.ResourceName]int64{}
		}
		var over *quotaLimit
		for i, l := range limits[ns] {
			if n := c.usage[l.name]; n > 0 && used[ns][l.name]+n > l.hard {
				over = &limits[ns][i]
				break
			}
		}
		if over == nil {
			// Admitted: the namespace's usage grows.
			for name, n := range c.usage {
				used[ns][name] += n
			}
			continue
		}
		qc.quotaExceeded(c.ce, c.unit, *over, c.usage[over.name], total[ns][over.name])
	}
}

// claimQuotaUsage is what creating the claim charges (resource_claims.go
// Usage); forPod is the claim of a pod's extended resources.
func (qc *quotaChecker) claimQuotaUsage(claim *resourceapi.ResourceClaim, forPod bool) map[v1.ResourceName]int64 {
	usage := map[v1.ResourceName]int64{claimCountQuota: 1}
	perClass := map[string]int64{}
	devices := func(mode resourceapi.DeviceAllocationMode, count int64) int64 {
		switch mode {
		case resourceapi.DeviceAllocationModeExactCount:
			return count
		case resourceapi.DeviceAllocationModeAll:
			return resourceapi.AllocationResultsMaxSize
		}
		return 0
	}
	for _, req := range claim.Spec.Devices.Requests {
		switch {
		case len(req.FirstAvailable) > 0:
			most := map[string]int64{}
			for _, sub := range req.FirstAvailable {
				most[sub.DeviceClassName] = max(most[sub.DeviceClassName], devices(sub.AllocationMode, sub.Count))
			}
			for class, n := range most {
				perClass[class] += n
			}
		case req.Exactly != nil:
			perClass[req.Exactly.DeviceClassName] += devices(req.Exactly.AllocationMode, req.Exactly.Count)
		}
	}
	for class, n := range perClass {
		usage[v1.ResourceName(class+v1.ResourceClaimsPerClass)] += n
		if !qc.feats.ExtendedResource || forPod {
			continue
		}
		usage[v1.ResourceName(v1.ResourceImplicitExtendedClaimsPerClass+class)] += n
		if o, ok := qc.known[class]; ok {
			if ext := o.Obj.(*resourceapi.DeviceClass).Spec.ExtendedResourceName; ext != nil && *ext != "" {
				usage[v1.ResourceName(v1.DefaultResourceRequestsPrefix+*ext)] += n
			}
		}
	}
	return usage
}

// quotaExceeded reports a claim the API server refuses to create, and
// keeps it from being allocated.
func (qc *quotaChecker) quotaExceeded(ce *claimEval, u *unit, l quotaLimit, asks, total int64) {
	ce.invalid = true
	q := l.quota.Obj.(*v1.ResourceQuota)
	limit := fmt.Sprintf("ResourceQuota %s allows %d of %s in namespace %s (spec.hard[%s])", l.quota.Name, l.hard, l.name, q.Namespace, l.name)
	together := fmt.Sprintf("the inputs' claims there ask for %d together", total)
	hint := fmt.Sprintf("raise spec.hard[%s] of ResourceQuota %s to at least %d, or ask for fewer devices; check counts only the inputs' claims, and what the namespace already holds counts too", l.name, l.quota.Name, total)
	f := Finding{Kind: FindingQuotaExceeded, Source: ce.source, Object: ce.object, Hint: hint}
	switch {
	case ce == u.extended:
		f.Object, f.Source = podObject(u.podObj), u.podObj.Source
		f.Message = fmt.Sprintf("%s; %s, and the claim the scheduler makes for the pod's extended resources (%d) is past it: the API server refuses to create it, so the pod stays Pending", limit, together, asks)
	case qc.report.Claims[ce.idx].From == "ResourceClaim":
		f.Field = ce.field + ".devices.requests"
		f.Message = fmt.Sprintf("%s; %s, and this claim (%d) is past it: the API server refuses to create it (exceeded quota), and the pods that use it stay Pending", limit, together, asks)
	default:
		f.Field = ce.field + ".devices.requests"
		f.Message = fmt.Sprintf("%s; %s, and a claim made from this template (%d) is past it: the API server refuses it to the resourceclaim controller (exceeded quota), so its pod stays Pending", limit, together, asks)
	}
	qc.findings.add(f)
}
