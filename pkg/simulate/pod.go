package simulate

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// PodResult is what a pod got: its claims' devices and each container's
// view.
type PodResult struct {
	Pod        string
	Claims     []PodClaim
	Containers []Container
}

// PodClaim is one of the pod's claims, allocated and prepared.
type PodClaim struct {
	// Name is the pod's name for the claim (spec.resourceClaims[].name).
	Name    string
	Claim   *resourceapi.ResourceClaim
	Devices []*drapb.Device
}

// RunPod does for one pod what the control plane and kubelet do: create
// claims from templates (the resourceclaim controller), allocate them (the
// scheduler's DRA plugin), prepare them over the plugin socket (the kubelet)
// and compute what each container receives (the container runtime).
// Templates are looked up in the fake API server.
func (c *Cluster) RunPod(ctx context.Context, pod *v1.Pod) (*PodResult, error) {
	res := &PodResult{Pod: pod.Namespace + "/" + pod.Name}
	var claims []*resourceapi.ResourceClaim
	for _, pc := range pod.Spec.ResourceClaims {
		claim, err := c.podClaim(ctx, pod, pc)
		if err != nil {
			return res, err
		}
		claim, err = c.Allocate(ctx, claim)
		if err != nil {
			return res, fmt.Errorf("pod %s: claim %q: %w", res.Pod, pc.Name, err)
		}
		claims = append(claims, claim)
		res.Claims = append(res.Claims, PodClaim{Name: pc.Name, Claim: claim})
	}
	if len(claims) == 0 {
		return res, nil
	}
	resp, err := c.NodePrepareResources(ctx, claims...)
	if err != nil {
		return res, fmt.Errorf("pod %s: NodePrepareResources: %w", res.Pod, err)
	}
	for i := range res.Claims {
		r := resp.Claims[string(res.Claims[i].Claim.UID)]
		if r == nil {
			return res, fmt.Errorf("pod %s: claim %q: no answer from the plugin", res.Pod, res.Claims[i].Name)
		}
		if r.Error != "" {
			return res, fmt.Errorf("pod %s: claim %q: prepare failed: %s", res.Pod, res.Claims[i].Name, r.Error)
		}
		res.Claims[i].Devices = r.Devices
	}
	for _, ctr := range pod.Spec.Containers {
		view, err := c.Inject(ctr.Name, containerCDIDevices(ctr, res.Claims))
		if err != nil {
			return res, fmt.Errorf("pod %s: container %s: %w", res.Pod, ctr.Name, err)
		}
		res.Containers = append(res.Containers, view)
	}
	return res, nil
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
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + pc.Name},
			Spec:       tmpl.Spec.Spec,
		}
		return c.CreateClaim(ctx, claim)
	default:
		return nil, fmt.Errorf("pod %s/%s: claim %q names neither a claim nor a template", pod.Namespace, pod.Name, pc.Name)
	}
}

// containerCDIDevices picks the CDI IDs of the devices a container asked for
// in resources.claims: all of a claim's devices, or those of one request.
func containerCDIDevices(ctr v1.Container, claims []PodClaim) []string {
	var ids []string
	for _, ref := range ctr.Resources.Claims {
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
