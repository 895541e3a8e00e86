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
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ExtendedResources is what the scheduler makes of a pod's extended
// resources (resources.limits: nvidia.com/gpu: 1) with DRAExtendedResource:
// those a DeviceClass maps (spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>) are allocated through one
// special claim, when the node has no device plugin offering them. gpudra
// checks an inventory of DRA drivers only, so no node has a device plugin.
type ExtendedResources struct {
	// Claim is the special claim, with one request per container and
	// resource (nil when the pod asks for no resource a class maps).
	Claim *resourceapi.ResourceClaim
	// Mappings say which request serves which container's resource, as
	// the scheduler writes them to the pod's
	// status.extendedResourceClaimStatus for the kubelet.
	Mappings []v1.ContainerExtendedResourceRequest
	// Classes maps each resource the claim serves to its DeviceClass.
	Classes map[v1.ResourceName]string
	// Unbacked are extended resources no DeviceClass maps: only a device
	// plugin could offer them, so the pod does not fit a node without one.
	Unbacked []v1.ResourceName
	// NotEnabled are extended resources a DeviceClass maps, on a version
	// that does not enable DRAExtendedResource: to the scheduler they are
	// device-plugin resources.
	NotEnabled []v1.ResourceName
}

// ExtendedResources works out the special claim for a pod's extended
// resources (request names container-<i>-request-<j>, init containers
// first; an init container that is not a sidecar reuses a later
// container's request when that one is big enough, as the scheduler does).
// The pod should be defaulted (DefaultPod).
func (s *Scheduler) ExtendedResources(pod *v1.Pod) ExtendedResources {
	var out ExtendedResources
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var backed []v1.ResourceName
	for name, q := range reqs {
		if q.IsZero() || !isDRAExtendedResourceName(name) {
			continue
		}
		switch {
		case s.classes.ForExtendedResource(name) == nil:
			out.Unbacked = append(out.Unbacked, name)
		case !s.features.ExtendedResource:
			out.NotEnabled = append(out.NotEnabled, name)
		default:
			backed = append(backed, name)
		}
	}
	slices.Sort(out.Unbacked)
	slices.Sort(out.NotEnabled)
	slices.Sort(backed)
	if len(backed) == 0 {
		return out
	}
	out.Classes = map[v1.ResourceName]string{}
	containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	var requests []resourceapi.DeviceRequest
	for _, name := range backed {
		class := s.classes.ForExtendedResource(name).Name
		out.Classes[name] = class
		reqs, maps := resourceRequests(pod, containers, name, class)
		requests = append(requests, reqs...)
		out.Mappings = append(out.Mappings, maps...)
	}
	slices.SortFunc(requests, func(a, b resourceapi.DeviceRequest) int { return strings.Compare(a.Name, b.Name) })
	out.Claim = &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   pod.Namespace,
			Name:        pod.Name + "-extended-resources",
			Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
	return out
}

// resourceRequests are the device requests of one extended resource
// (name, backed by class) in a pod and how its containers map to them.
// Long-lived containers (regular ones and sidecars) each get their
// own request; a plain init container runs before them and may
// reuse the requests of those after it, and only the largest of
// the init containers' own requests is kept.
func resourceRequests(pod *v1.Pod, containers []v1.Container, name v1.ResourceName, class string) ([]resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	var requests []resourceapi.DeviceRequest
	long := make([]*resourceapi.DeviceRequest, len(containers))
	var longMaps, shortMaps []v1.ContainerExtendedResourceRequest
	for i := range containers {
		if !shortLived(pod, i) {
			long[i], longMaps = containerRequest(i, &containers[i], name, class, nil, longMaps)
		}
	}
	var biggest *resourceapi.DeviceRequest
	shortNames := map[string]bool{}
	for i := range containers {
		if !shortLived(pod, i) {
			continue
		}
		var r *resourceapi.DeviceRequest
		r, shortMaps = containerRequest(i, &containers[i], name, class, long[i:], shortMaps)
		if r == nil {
			continue
		}
		shortNames[r.Name] = true
		if biggest == nil || biggest.Exactly.Count < r.Exactly.Count {
			biggest = r
		}
	}
	if biggest != nil {
		for i := range shortMaps {
			if shortNames[shortMaps[i].RequestName] {
				shortMaps[i].RequestName = biggest.Name
			}
		}
		requests = append(requests, *biggest)
	}
	for _, r := range long {
		if r != nil {
			requests = append(requests, *r)
		}
	}
	return requests, append(longMaps, shortMaps...)
}

// shortLived says whether container i of init+regular containers is an
// init container that is not a sidecar: it ends before the others start.
func shortLived(pod *v1.Pod, i int) bool {
	if i >= len(pod.Spec.InitContainers) {
		return false
	}
	p := pod.Spec.InitContainers[i].RestartPolicy
	return p == nil || *p != v1.ContainerRestartPolicyAlways
}

// containerRequest returns the request container i needs for one resource
// beyond what the reusable requests give it (nil when they suffice or it
// asks for none), and the mappings with its own appended.
func containerRequest(i int, c *v1.Container, name v1.ResourceName, class string, reusable []*resourceapi.DeviceRequest, maps []v1.ContainerExtendedResourceRequest) (*resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	q, ok := c.Resources.Requests[name]
	if !ok {
		return nil, maps
	}
	want, ok := q.AsInt64()
	if !ok || want == 0 {
		return nil, maps
	}
	have := int64(0)
	for _, r := range reusable {
		if r == nil {
			continue
		}
		have += r.Exactly.Count
		maps = append(maps, v1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(name), RequestName: r.Name})
		if have >= want {
			return nil, maps
		}
	}
	// The request is named after the container's index and the resource's
	// index among the container's sorted resource names.
	names := make([]string, 0, len(c.Resources.Requests))
	for n := range c.Resources.Requests {
		names = append(names, string(n))
	}
	slices.Sort(names)
	req := &resourceapi.DeviceRequest{
		Name: fmt.Sprintf("container-%d-request-%d", i, slices.Index(names, string(name))),
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: class,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           want - have,
		},
	}
	return req, append(maps, v1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(name), RequestName: req.Name})
}

// isDRAExtendedResourceName: an extended resource (a domain-qualified name
// outside kubernetes.io that can be quota'd as requests.<name>), or a
// class's implicit name.
func isDRAExtendedResourceName(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix) || isExtendedResourceName(name)
}
