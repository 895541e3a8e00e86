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

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// AdminNamespaceLabel is the label a namespace needs for its claims to ask
// for admin access to devices (k8s.io/kubernetes pkg/apis/resource,
// DRAAdminNamespaceLabelKey): the API server rejects a ResourceClaim or
// ResourceClaimTemplate with adminAccess: true in any other namespace.
const AdminNamespaceLabel = "resource.kubernetes.io/admin-access"

// checkAdminAccess does what the API server does on create
// (pkg/registry/resource AuthorizedForAdmin): a claim or template that
// asks for admin access must be in a namespace labelled for it. The
// inputs' Namespace objects say; a namespace check cannot see is a
// warning, since only the cluster knows its labels. It says whether the
// API server rejects the object.
func (ub *unitBuilder) checkAdminAccess(o scheduler.Object, namespace string, spec *resourceapi.ResourceClaimSpec, field string) bool {
	at := -1
	for i, req := range spec.Devices.Requests {
		if req.Exactly != nil && req.Exactly.AdminAccess != nil && *req.Exactly.AdminAccess {
			at = i
			break
		}
	}
	if at < 0 {
		return false
	}
	f := Finding{Kind: FindingInvalid, Source: o.Source, Object: o.Kind + " " + o.Name, Field: fmt.Sprintf("%s.devices.requests[%d].exactly.adminAccess", field, at),
		Hint: fmt.Sprintf("label the namespace: kubectl label namespace %s %s=true (an admin's decision: admin access reaches devices other claims hold)", namespace, AdminNamespaceLabel)}
	ns, seen := ub.namespaces[namespace]
	switch {
	case seen && ns.Labels[AdminNamespaceLabel] == "true":
		return false
	case seen:
		f.Message = fmt.Sprintf("admin access to devices requires the `%s: true` label on the containing namespace, and Namespace %s has none: the API server rejects the %s", AdminNamespaceLabel, namespace, o.Kind)
		ub.findings.add(f)
		return true
	}
	f.Severity = SeverityWarning
	f.Message = fmt.Sprintf("admin access to devices requires the `%s: true` label on namespace %s, which is not among the inputs: check cannot see its labels, and the API server rejects the %s unless it has the label", AdminNamespaceLabel, namespace, o.Kind)
	f.Hint += "; give check the Namespace object to check it"
	ub.findings.add(f)
	return false
}

// namespacesOf indexes the inputs' Namespaces by name.
func namespacesOf(in *scheduler.Manifests) map[string]*v1.Namespace {
	out := map[string]*v1.Namespace{}
	for _, o := range in.Namespaces {
		ns := o.Obj.(*v1.Namespace)
		out[ns.Name] = ns
	}
	return out
}
