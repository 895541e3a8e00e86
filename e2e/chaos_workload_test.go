//go:build e2e && chaos

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

package e2e

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A claim shape is what one pod asks for. The shapes cover what the node
// state prepares differently: whole GPUs (one, two), MIG partitions created
// on demand (one, several on one GPU, a large one), a claim with an opaque
// config, and a claim two pods share.
var claimShapes = []string{"gpu", "gpu-x2", "gpu-config", "mig-1g", "mig-2g+1g-one-gpu", "mig-3g", "shared"}

// createPod creates a pod of a random shape, with ResourceClaims of its
// own (deleted with it), or joins a live pod's shared claim.
func (c *chaos) createPod(ctx context.Context, i int) {
	shape := claimShapes[c.rng.IntN(len(claimShapes))]
	name := fmt.Sprintf("chaos-%d", i)
	c.next++
	p := chaosPod{name: name, shape: shape, created: time.Now()}
	if shape == "shared" {
		// Join a shared claim that a live pod holds, or start one.
		for _, other := range c.live {
			if other.shape == "shared" && len(p.claims) == 0 {
				p.claims = []string{other.claims[0]}
			}
		}
		if len(p.claims) == 0 {
			p.claims = []string{name + "-shared"}
			c.createClaim(ctx, p.claims[0], c.e.gpuRequest(1).Devices)
		}
	} else {
		claim := name + "-claim"
		p.claims = []string{claim}
		c.createClaim(ctx, claim, c.shapeSpec(shape))
	}
	pod := c.e.gpuPod(name)
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "echo READY; exec sleep 36000"}
	for j, claim := range p.claims {
		ref := fmt.Sprintf("c%d", j)
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: ref, ResourceClaimName: &claim})
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: ref})
	}
	if _, err := c.e.cs.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		c.violate("create pod "+name, err.Error())
		return
	}
	c.live[name] = p
	c.podsCreated[shape]++
}

func (c *chaos) createClaim(ctx context.Context, name string, devices resourceapi.DeviceClaim) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       resourceapi.ResourceClaimSpec{Devices: devices},
	}
	if _, err := c.e.cs.ResourceV1().ResourceClaims(testNS).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		c.violate("create claim "+name, err.Error())
	}
}

// shapeSpec is the claim of a shape.
func (c *chaos) shapeSpec(shape string) resourceapi.DeviceClaim {
	mig := func(name, profile string) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: migClassName(c.e.driver, profile), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		}}
	}
	switch shape {
	case "gpu-x2":
		return c.e.gpuRequest(2).Devices
	case "gpu-config":
		d := c.e.gpuRequest(1).Devices
		d.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: c.e.driver, Parameters: runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","utility","video"]}`)}},
		}}}
		return d
	case "mig-1g":
		return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{mig("a", "1g.10gb")}}
	case "mig-2g+1g-one-gpu":
		attr := resourceapi.FullyQualifiedName(c.e.driver + "/parentUUID")
		return resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{mig("a", "2g.20gb"), mig("b", "1g.10gb")},
			Constraints: []resourceapi.DeviceConstraint{{Requests: []string{"a", "b"}, MatchAttribute: &attr}},
		}
	case "mig-3g":
		return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{mig("a", "3g.40gb")}}
	default: // gpu
		return c.e.gpuRequest(1).Devices
	}
}

// migClassName is the chart's per-profile DeviceClass (deviceclasses/
// mig-profiles.yaml): mig-<profile>.gpudra.io, or mig-<profile>.<driver>
// with another driver name.
func migClassName(driver, profile string) string {
	if driver == "gpu.gpudra.io" {
		return "mig-" + profile + ".gpudra.io"
	}
	return "mig-" + profile + "." + driver
}
