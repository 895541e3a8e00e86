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

package scheduler

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpudra/gpudra/internal/spelling"
)

// What the API server validates on the objects the scheduler's DRA plugin
// reads, offline. The resource.k8s.io/v1 rules that have been made
// declarative are the API's own generated validators
// (k8s.io/api/resource/v1 Validate_*, run as on a create; alpha ones,
// which a default API server does not enforce, left out); object names
// use apimachinery's validators (k8s.io/apimachinery/pkg/api/validation);
// the rest of the hand-written rules of k8s.io/kubernetes
// pkg/apis/resource/validation and pkg/apis/core/validation
// (validatePodResourceClaim) that gpudra's users meet are written out
// here, with the same messages, because that package is not importable
// as a library (k8s.io/kubernetes pins every staging module at v0.0.0).

// validateObject reports what the API server rejects on create. obj is
// decoded and not yet defaulted; path is where the object's fields are
// relative to the document (a workload's pod template: "" for its pod).
func validateObject(obj runtime.Object) field.ErrorList {
	ctx := context.Background()
	op := operation.Operation{Type: operation.Create}
	var errs field.ErrorList
	switch o := obj.(type) {
	case *resourceapi.ResourceClaim:
		errs = append(errs, validateMeta(&o.ObjectMeta, true)...)
		spec := o.Spec.DeepCopy()
		DefaultClaimSpec(spec)
		errs = append(errs, declarative(resourceapi.Validate_ResourceClaimSpec(ctx, op, field.NewPath("spec"), spec, nil))...)
		errs = append(errs, validateDeviceClaim(&spec.Devices, field.NewPath("spec", "devices"))...)
	case *resourceapi.ResourceClaimTemplate:
		errs = append(errs, validateMeta(&o.ObjectMeta, true)...)
		spec := o.Spec.DeepCopy()
		DefaultClaimSpec(&spec.Spec)
		errs = append(errs, declarative(resourceapi.Validate_ResourceClaimTemplateSpec(ctx, op, field.NewPath("spec"), spec, nil))...)
		errs = append(errs, validateDeviceClaim(&spec.Spec.Devices, field.NewPath("spec", "spec", "devices"))...)
	case *resourceapi.DeviceClass:
		errs = append(errs, validateMeta(&o.ObjectMeta, false)...)
		errs = append(errs, declarative(resourceapi.Validate_DeviceClassSpec(ctx, op, field.NewPath("spec"), &o.Spec, nil))...)
	case *v1.Namespace:
		errs = append(errs, apivalidation.ValidateObjectMeta(&o.ObjectMeta, false, apivalidation.ValidateNamespaceName, field.NewPath("metadata"))...)
	case *v1.Pod:
		errs = append(errs, validateMeta(&o.ObjectMeta, true)...)
		errs = append(errs, validatePodClaims(&o.Spec, field.NewPath("spec"))...)
	case *appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.StatefulSet, *appsv1.DaemonSet, *v1.ReplicationController, *batchv1.Job, *batchv1.CronJob:
		if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
			errs = append(errs, validateMeta(acc.GetObjectMeta().(*metav1.ObjectMeta), true)...)
		}
	}
	return errs
}

// validatePodTemplate reports what the API server rejects in a workload's
// pod template, relative to the template.
func validatePodTemplate(pod *v1.Pod) field.ErrorList {
	return validatePodClaims(&pod.Spec, field.NewPath("spec"))
}

// validateMeta checks the name and namespace as the API server does for
// the kinds here: DNS subdomain names, DNS label namespaces. A missing
// namespace is defaulted by kubectl, not an error here.
func validateMeta(meta *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	m := meta.DeepCopy()
	if namespaced && m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	return apivalidation.ValidateObjectMeta(m, namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

// declarative keeps the errors a default API server enforces: not the
// alpha ones.
func declarative(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if !e.IsAlpha() {
			out = append(out, e)
		}
	}
	return out
}

// validateDeviceClaim holds the hand-written rules of
// pkg/apis/resource/validation (validateDeviceClaim, validateDeviceRequest,
// validateDeviceSubRequest, validateDeviceAllocationMode,
// validateDeviceConstraint, validateDeviceClaimConfiguration) that the
// declarative validators do not cover: request names are DNS labels, a
// request sets exactly one of exactly and firstAvailable, the allocation
// mode and count agree, constraints and configs name requests the claim
// has. spec is defaulted.
func validateDeviceClaim(dc *resourceapi.DeviceClaim, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]sets.Set[string]{}
	for _, r := range dc.Requests {
		subs := sets.New[string]()
		for _, s := range r.FirstAvailable {
			subs.Insert(s.Name)
		}
		names[r.Name] = subs
	}
	if len(dc.Requests) == 0 {
		errs = append(errs, field.Required(path.Child("requests"), "a claim needs at least one request"))
	}
	for i, r := range dc.Requests {
		rp := path.Child("requests").Index(i)
		errs = append(errs, dnsLabel(r.Name, rp.Child("name"))...)
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, field.Required(rp, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, field.Invalid(rp, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil:
			e := r.Exactly
			errs = append(errs, deviceClassName(e.DeviceClassName, rp.Child("exactly", "deviceClassName"))...)
			errs = append(errs, allocationMode(e.AllocationMode, e.Count, rp.Child("exactly"))...)
		default:
			for j, s := range r.FirstAvailable {
				sp := rp.Child("firstAvailable").Index(j)
				errs = append(errs, dnsLabel(s.Name, sp.Child("name"))...)
				errs = append(errs, deviceClassName(s.DeviceClassName, sp.Child("deviceClassName"))...)
				errs = append(errs, allocationMode(s.AllocationMode, s.Count, sp)...)
			}
		}
	}
	for i, c := range dc.Constraints {
		cp := path.Child("constraints").Index(i)
		for j, n := range c.Requests {
			errs = append(errs, requestRef(n, cp.Child("requests").Index(j), names)...)
		}
		if c.MatchAttribute == nil && c.DistinctAttribute == nil {
			errs = append(errs, field.Required(cp, `exactly one of "matchAttribute" or "distinctAttribute" is required`))
		}
	}
	for i, c := range dc.Config {
		cp := path.Child("config").Index(i)
		for j, n := range c.Requests {
			errs = append(errs, requestRef(n, cp.Child("requests").Index(j), names)...)
		}
		if c.Opaque == nil {
			errs = append(errs, field.Required(cp.Child("opaque"), ""))
		}
	}
	return errs
}

func dnsLabel(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func deviceClassName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func allocationMode(mode resourceapi.DeviceAllocationMode, count int64, p *field.Path) field.ErrorList {
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(p.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case resourceapi.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(p.Child("count"), count, "must be greater than zero")}
		}
	default:
		return field.ErrorList{field.NotSupported(p.Child("allocationMode"), mode, []resourceapi.DeviceAllocationMode{resourceapi.DeviceAllocationModeAll, resourceapi.DeviceAllocationModeExactCount})}
	}
	return nil
}

// requestRef checks a reference to a request ("name" or "name/sub").
func requestRef(ref string, p *field.Path, names map[string]sets.Set[string]) field.ErrorList {
	var known []string
	for n, subs := range names {
		known = append(known, n)
		for s := range subs {
			known = append(known, n+"/"+s)
		}
	}
	sort.Strings(known)
	msg := "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'; the claim's requests: " + strings.Join(known, ", ")
	if c := spelling.Closest(ref, known); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	bad := field.ErrorList{field.Invalid(p, ref, msg)}
	base, sub, hasSub := strings.Cut(ref, "/")
	subs, ok := names[base]
	if !ok || strings.Contains(sub, "/") || hasSub && !subs.Has(sub) {
		return bad
	}
	return nil
}

// validatePodClaims holds pkg/apis/core/validation's validatePodResourceClaim
// rules on names: each of spec.resourceClaims has a DNS label name, once,
// and names a claim (a DNS subdomain) or a template.
func validatePodClaims(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range spec.ResourceClaims {
		p := path.Child("resourceClaims").Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case seen.Has(c.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		default:
			errs = append(errs, dnsLabel(c.Name, p.Child("name"))...)
			seen.Insert(c.Name)
		}
		if c.ResourceClaimName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*c.ResourceClaimName, false) {
				errs = append(errs, field.Invalid(p.Child("resourceClaimName"), *c.ResourceClaimName, msg))
			}
		}
		if c.ResourceClaimTemplateName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*c.ResourceClaimTemplateName, false) {
				errs = append(errs, field.Invalid(p.Child("resourceClaimTemplateName"), *c.ResourceClaimTemplateName, msg))
			}
		}
	}
	return errs
}

// ResourceError is what the API server rejects about one container's
// extended resource (pkg/apis/core/validation validateResourceRequirements
// and ValidateResourceQuantityValue: an extended resource is not
// overcommitable, so a request needs a limit and must equal it, and it is
// counted in whole units).
type ResourceError struct {
	Field   string // the request or limit that is wrong, below the pod
	Message string // what is wrong, with the API server's words
	Hint    string // how to fix it
}

// extendedResourceErrors lists the extended resources (nvidia.com/gpu,
// not the implicit deviceclass.resource.kubernetes.io/<class> names,
// which are in the kubernetes.io namespace and so overcommitable to the
// API server) that the API server rejects in a pod spec.
func extendedResourceErrors(spec *v1.PodSpec, path string) []ResourceError {
	var out []ResourceError
	for _, list := range []struct {
		field      string
		containers []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i, c := range list.containers {
			at := fmt.Sprintf("%s.%s[%d].resources", path, list.field, i)
			out = append(out, containerResourceErrors(c, at)...)
		}
	}
	if spec.Resources != nil {
		// Pod-level resources are cpu, memory and hugepages only.
		for _, part := range []struct {
			field string
			list  v1.ResourceList
		}{{"limits", spec.Resources.Limits}, {"requests", spec.Resources.Requests}} {
			for _, name := range sortedResourceNames(part.list) {
				if isExtendedResourceName(name) {
					out = append(out, ResourceError{Field: fmt.Sprintf("%s.resources.%s[%s]", path, part.field, name),
						Message: fmt.Sprintf("%s in the pod-level spec.resources: Unsupported value (pod-level resources are cpu, memory and hugepages-*)", name),
						Hint:    fmt.Sprintf("ask for %s in the resources of the container that uses the device", name)})
				}
			}
		}
	}
	return out
}

func containerResourceErrors(c v1.Container, at string) []ResourceError {
	var out []ResourceError
	for _, name := range sortedResourceNames(c.Resources.Limits) {
		if q := c.Resources.Limits[name]; isExtendedResourceName(name) && q.MilliValue()%1000 != 0 {
			out = append(out, fractionError(c.Name, fmt.Sprintf("%s.limits[%s]", at, name), name, q))
		}
	}
	for _, name := range sortedResourceNames(c.Resources.Requests) {
		if !isExtendedResourceName(name) {
			continue
		}
		q := c.Resources.Requests[name]
		field := fmt.Sprintf("%s.requests[%s]", at, name)
		limit, limited := c.Resources.Limits[name]
		switch {
		case q.MilliValue()%1000 != 0:
			if !limited || limit.MilliValue()%1000 == 0 {
				out = append(out, fractionError(c.Name, field, name, q))
			}
		case !limited:
			out = append(out, ResourceError{Field: field,
				Message: fmt.Sprintf("container %s requests %s %s without a limit: %s.limits: Required value: Limit must be set for non overcommitable resources (an extended resource)", c.Name, q.String(), name, at),
				Hint:    fmt.Sprintf("write it under resources.limits (%s: %s); requests may be left out, they default to the limits", name, q.String())})
		case q.Cmp(limit) != 0:
			out = append(out, ResourceError{Field: field,
				Message: fmt.Sprintf("container %s requests %s %s but its limit is %s: must be equal to %s limit of %s (an extended resource is not overcommitable)", c.Name, q.String(), name, limit.String(), name, limit.String()),
				Hint:    fmt.Sprintf("drop resources.requests[%s] (it defaults to the limit) or make it %s", name, limit.String())})
		}
	}
	return out
}

func fractionError(container, field string, name v1.ResourceName, q resource.Quantity) ResourceError {
	return ResourceError{Field: field,
		Message: fmt.Sprintf("container %s asks for %s of %s: must be an integer (extended resources are counted in whole devices)", container, q.String(), name),
		Hint:    "ask for a whole number of devices; to share a GPU, use a ResourceClaim for a shared class (mps.gpudra.io, timeslicing.gpudra.io with capacity.requests.memory) or a MIG partition (nvidia.com/mig-1g.10gb: 1); docs/sharing.md"}
}

// isExtendedResourceName is pkg/apis/core/helper.IsExtendedResourceName:
// a domain-qualified name outside kubernetes.io, not requests.*, that
// stays a qualified name as requests.<name>.
func isExtendedResourceName(name v1.ResourceName) bool {
	n := string(name)
	if !strings.Contains(n, "/") || strings.Contains(n, v1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(n, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+n)) == 0
}

func sortedResourceNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// placeholder matches what templating tools leave in a manifest that was
// not rendered: __INDEX__, {{ .Values.x }}, ${VAR}, $VAR.
var placeholder = regexp.MustCompile(`__[A-Z][A-Z0-9_]*__|\{\{.*\}\}|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Z_][A-Z0-9_]+`)

// nameHint says how to fix an invalid name: render the template it comes
// from, or a valid name close to it.
func nameHint(value string) string {
	if m := placeholder.FindString(value); m != "" {
		return fmt.Sprintf("%q is a placeholder of a templating tool: render the manifest first (helm template, envsubst, kustomize build), then check the result", m)
	}
	fixed := strings.ToLower(value)
	fixed = regexp.MustCompile(`[^a-z0-9.-]+`).ReplaceAllString(fixed, "-")
	fixed = strings.Trim(fixed, "-.")
	if fixed == "" || fixed == value {
		return "names are lower-case letters, digits and '-' (and '.' in object names), starting and ending with a letter or digit"
	}
	return fmt.Sprintf("names are lower-case letters, digits and '-', starting and ending with a letter or digit: e.g. %q", fixed)
}
