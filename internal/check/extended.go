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
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

// extendedResources turns a pod's extended resources into the claim the
// scheduler makes for them (DRAExtendedResource), and reports those
// nothing offers: no DeviceClass maps them, or the Kubernetes version does
// not map them, and an inventory of DRA devices has no device plugin.
func (ub *unitBuilder) extendedResources(u *unit) {
	o := u.podObj
	pod := o.Obj.(*v1.Pod)
	object := "Pod " + o.Name
	u.ext = ub.sched.ExtendedResources(pod)
	for _, name := range u.ext.Unbacked {
		field, container := resourceField(pod, name)
		msg := fmt.Sprintf("container %s asks for %s, which no DeviceClass maps (spec.extendedResourceName) and no device plugin offers on this inventory: the pod stays Pending (Insufficient %s)", container, name, name)
		ub.findings.add(Finding{Kind: FindingExtendedResource, Source: o.Source, Object: object, Field: field, Message: msg, Hint: ub.extendedHint(name)})
		u.blocked = append(u.blocked, fmt.Sprintf("nothing offers %s", name))
	}
	for _, name := range u.ext.NotEnabled {
		field, container := resourceField(pod, name)
		class := ub.sched.Classes().ForExtendedResource(name).Name
		msg := fmt.Sprintf("container %s asks for %s, which DeviceClass %s maps, but the scheduler of Kubernetes %s does not allocate extended resources through DRA (DRAExtendedResource is on by default from 1.36): only a device plugin could offer it, and this inventory has none; the pod stays Pending", container, name, class, ub.feats.Version)
		ub.findings.add(Finding{Kind: FindingExtendedResource, Source: o.Source, Object: object, Field: field, Message: msg,
			Hint: fmt.Sprintf("on Kubernetes %s ask for the device with a ResourceClaimTemplate for DeviceClass %s instead", ub.feats.Version, class)})
		u.blocked = append(u.blocked, fmt.Sprintf("nothing offers %s on Kubernetes %s", name, ub.feats.Version))
	}
	if u.ext.Claim == nil {
		return
	}
	from := fmt.Sprintf("extended resources of %s (%s)", object, extendedList(u.ext.Classes))
	ce := ub.newClaim(u.ext.Claim, from, o.Source, object, "extendedResourceClaim.spec")
	ce.info.Pod = o.Name
	u.extended = ce
}

// resourceField locates the first container resource of that name.
func resourceField(pod *v1.Pod, name v1.ResourceName) (string, string) {
	for _, list := range []struct {
		field      string
		containers []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i, c := range list.containers {
			if _, ok := c.Resources.Limits[name]; ok {
				return fmt.Sprintf("spec.%s[%d].resources.limits[%s]", list.field, i, name), c.Name
			}
			if _, ok := c.Resources.Requests[name]; ok {
				return fmt.Sprintf("spec.%s[%d].resources.requests[%s]", list.field, i, name), c.Name
			}
		}
	}
	return "spec", ""
}

// extendedHint names the mapped extended resources, and the classes that
// could map this one.
func (ub *unitBuilder) extendedHint(name v1.ResourceName) string {
	var mapped []string
	for _, n := range sortedKeys(ub.known) {
		dc := ub.known[n].Obj.(*resourceapi.DeviceClass)
		if dc.Spec.ExtendedResourceName != nil {
			mapped = append(mapped, *dc.Spec.ExtendedResourceName)
		}
	}
	sort.Strings(mapped)
	h := didYouMean(string(name), mapped)
	if strings.HasPrefix(string(name), "nvidia.com/") && ub.opts.DriverName != gpu.DefaultDriverName {
		h += fmt.Sprintf("with driver name %s gpudra's classes map no nvidia.com/ names (the chart leaves them to the installation with the default driver name); ", ub.opts.DriverName)
	}
	h += fmt.Sprintf("ask for deviceclass.resource.kubernetes.io/<class>: N (every class's implicit name, e.g. deviceclass.resource.kubernetes.io/%s), use a ResourceClaimTemplate, or give a DeviceClass spec.extendedResourceName: %s. ", ub.opts.DriverName, name)
	switch {
	case len(mapped) > 6:
		h += fmt.Sprintf("mapped here: %s … (%d in all)", strings.Join(mapped[:6], ", "), len(mapped))
	case len(mapped) > 0:
		h += "mapped here: " + strings.Join(mapped, ", ")
	}
	return strings.TrimSpace(h)
}

func extendedList(classes map[v1.ResourceName]string) string {
	var parts []string
	for name, class := range classes {
		parts = append(parts, fmt.Sprintf("%s → DeviceClass %s", name, class))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
