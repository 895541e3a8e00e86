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

package simulate

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// PodResult is what a pod got: its claims' devices and each container's
// view.
type PodResult struct {
	Pod        string
	Claims     []PodClaim
	Containers []Container
	// extended maps containers to the requests of the claim for the
	// pod's extended resources (Name "" in Claims).
	extended []v1.ContainerExtendedResourceRequest
}

// PodClaim is one of the pod's claims, allocated and prepared.
type PodClaim struct {
	// Name is the pod's name for the claim (spec.resourceClaims[].name),
	// or "" for the claim the scheduler made for the pod's extended
	// resources.
	Name    string
	Claim   *resourceapi.ResourceClaim
	Devices []*drapb.Device
}

// RunPod does for one pod what the control plane and kubelet do: create
// claims from templates (the resourceclaim controller), allocate them all
// together with the claim for the pod's extended resources (the
// scheduler's DRA plugin, through the offline scheduler core), prepare
// them over the plugin socket (the kubelet) and compute what each
// container receives (the container runtime). Templates are looked up in
// the fake API server.
func (c *Cluster) RunPod(ctx context.Context, pod *v1.Pod) (*PodResult, error) {
	pod = pod.DeepCopy()
	scheduler.DefaultPod(pod)
	res := &PodResult{Pod: pod.Namespace + "/" + pod.Name}
	var claims []*resourceapi.ResourceClaim
	for _, pc := range pod.Spec.ResourceClaims {
		claim, err := c.podClaim(ctx, pod, pc)
		if err != nil {
			return res, err
		}
		claims = append(claims, claim)
		res.Claims = append(res.Claims, PodClaim{Name: pc.Name, Claim: claim})
	}
	sched, _, err := c.Scheduler(ctx)
	if err != nil {
		return res, err
	}
	ext := sched.ExtendedResources(pod)
	if len(ext.Unbacked)+len(ext.NotEnabled) > 0 {
		return res, fmt.Errorf("pod %s: nothing offers %v: %w", res.Pod, append(ext.Unbacked, ext.NotEnabled...), ErrUnschedulable)
	}
	if ext.Claim != nil {
		// The scheduler creates this claim when it binds the pod; here it
		// is created first and allocated with the others.
		claim, err := c.CreateClaim(ctx, ext.Claim)
		if err != nil {
			return res, fmt.Errorf("pod %s: claim for extended resources: %w", res.Pod, err)
		}
		claims = append(claims, claim)
		res.Claims = append(res.Claims, PodClaim{Claim: claim})
		res.extended = ext.Mappings
	}
	if len(claims) == 0 {
		return res, nil
	}
	claims, err = c.AllocatePod(ctx, claims)
	if err != nil {
		return res, fmt.Errorf("pod %s: %w", res.Pod, err)
	}
	for i := range claims {
		if claims[i], err = c.reserve(ctx, claims[i], pod); err != nil {
			return res, fmt.Errorf("pod %s: %w", res.Pod, err)
		}
		res.Claims[i].Claim = claims[i]
	}
	resp, err := c.NodePrepareResources(ctx, claims...)
	if err != nil {
		return res, fmt.Errorf("pod %s: NodePrepareResources: %w", res.Pod, err)
	}
	for i := range res.Claims {
		r := resp.Claims[string(res.Claims[i].Claim.UID)]
		if r == nil {
			return res, fmt.Errorf("pod %s: claim %s: no answer from the plugin", res.Pod, res.Claims[i].label())
		}
		if r.Error != "" {
			return res, fmt.Errorf("pod %s: claim %s: prepare failed: %s", res.Pod, res.Claims[i].label(), r.Error)
		}
		res.Claims[i].Devices = r.Devices
	}
	for _, ctr := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		ids := containerCDIDevices(ctr, res.Claims, res.extended)
		if len(ids) == 0 && isInitContainer(pod, ctr.Name) {
			continue
		}
		view, err := c.Inject(ctr.Name, ids)
		if err != nil {
			return res, fmt.Errorf("pod %s: container %s: %w", res.Pod, ctr.Name, err)
		}
		res.Containers = append(res.Containers, view)
	}
	return res, nil
}

func (pc PodClaim) label() string {
	if pc.Name == "" {
		return "for extended resources"
	}
	return fmt.Sprintf("%q", pc.Name)
}

func isInitContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// StopPod unprepares the pod's claims, as the kubelet does once the pod's
// containers are gone. A claim shared with another pod stays prepared on a
// real node until its last pod goes; the caller decides.
func (c *Cluster) StopPod(ctx context.Context, res *PodResult) error {
	var claims []*resourceapi.ResourceClaim
	for _, pc := range res.Claims {
		claims = append(claims, pc.Claim)
	}
	resp, err := c.NodeUnprepareResources(ctx, claims...)
	if err != nil {
		return err
	}
	for uid, r := range resp.Claims {
		if r.Error != "" {
			return fmt.Errorf("unprepare claim %s: %s", uid, r.Error)
		}
	}
	return nil
}

// podClaim returns the claim behind a pod's claim entry, creating it from
// its template the way the resourceclaim controller does.
func (c *Cluster) podClaim(ctx context.Context, pod *v1.Pod, pc v1.PodResourceClaim) (*resourceapi.ResourceClaim, error) {
	switch {
	case pc.ResourceClaimName != nil:
		claim, err := c.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *pc.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: claim %q: %w", pod.Namespace, pod.Name, pc.Name, err)
		}
		return claim, nil
	case pc.ResourceClaimTemplateName != nil:
		tmpl, err := c.Client.ResourceV1().ResourceClaimTemplates(pod.Namespace).Get(ctx, *pc.ResourceClaimTemplateName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: claim %q: template: %w", pod.Namespace, pod.Name, pc.Name, err)
		}
		return c.CreateClaim(ctx, scheduler.ClaimFromTemplate(pod, pc.Name, tmpl))
	default:
		return nil, fmt.Errorf("pod %s/%s: claim %q names neither a claim nor a template", pod.Namespace, pod.Name, pc.Name)
	}
}

// containerCDIDevices picks the CDI IDs of the devices a container asked for
// in resources.claims (all of a claim's devices, or those of one request),
// and those of the requests the scheduler made for its extended resources
// (as the kubelet reads them from the pod's extendedResourceClaimStatus).
func containerCDIDevices(ctr v1.Container, claims []PodClaim, extended []v1.ContainerExtendedResourceRequest) []string {
	refs := append([]v1.ResourceClaim(nil), ctr.Resources.Claims...)
	for _, m := range extended {
		if m.ContainerName == ctr.Name {
			refs = append(refs, v1.ResourceClaim{Name: "", Request: m.RequestName})
		}
	}
	var ids []string
	for _, ref := range refs {
		for _, pc := range claims {
			if pc.Name != ref.Name {
				continue
			}
			for _, d := range pc.Devices {
				if ref.Request != "" && !slices.Contains(d.RequestNames, ref.Request) {
					continue
				}
				for _, id := range d.CdiDeviceIds {
					if !slices.Contains(ids, id) {
						ids = append(ids, id)
					}
				}
			}
		}
	}
	return ids
}

// reserve adds the pod to the claim's reservedFor, as the scheduler does
// when it binds the pod; the kubelet (and the plugin's metrics) read it.
func (c *Cluster) reserve(ctx context.Context, claim *resourceapi.ResourceClaim, pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	uid := pod.UID
	if uid == "" {
		uid = types.UID("pod-uid-" + pod.Namespace + "-" + pod.Name)
	}
	for _, r := range claim.Status.ReservedFor {
		if r.UID == uid {
			return claim, nil
		}
	}
	claim = claim.DeepCopy()
	claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: uid})
	return c.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
}
