//go:build e2e

package e2e

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gpuResource is the device plugin's resource that the whole-GPU class
// maps (its extendedResourceName).
const gpuResource = "nvidia.com/gpu"

// nvidiaGPUExtendedResource: a pod spec from the device-plugin world,
// resources.limits nvidia.com/gpu: 1, gets one whole GPU through the
// scheduler's extended-resource claim, and sees exactly that GPU.
func (e *env) nvidiaGPUExtendedResource(ctx context.Context, t *testing.T) {
	pod := e.gpuPod("legacy-gpu")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpuResource: resource.MustParse("1")}
	e.startPod(ctx, t, pod)
	defer e.deletePods(ctx, t, "legacy-gpu")

	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "legacy-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status.ExtendedResourceClaimStatus
	if st == nil || st.ResourceClaimName == "" {
		t.Fatalf("pod has no extended-resource claim: %+v", p.Status)
	}
	claim, err := e.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devs := e.allocated(ctx, t, claim)
	if len(devs) != 1 || devs[0].uuid == "" {
		t.Fatalf("extended-resource claim %s got %+v, want one whole GPU", claim.Name, devs)
	}
	assertSees(t, "legacy-gpu", e.whatPodSees(ctx, t, "legacy-gpu"), devs)
}
