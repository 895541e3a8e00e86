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

package fleet

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

const driver = "gpu.gpudra.io"

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func gpuDev(minor int, model, uuid string) resourceapi.Device {
	return resourceapi.Device{Name: fmt.Sprintf("gpu-%d", minor), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": str("gpu"), "productName": str(model), "uuid": str(uuid),
	}}
}

func migDev(name, model, profile, parent string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": str("mig"), "productName": str(model), "profile": str(profile), "parentUUID": str(parent),
	}}
}

func tainted(d resourceapi.Device) resourceapi.Device {
	d.Taints = []resourceapi.DeviceTaint{{Key: driver + "/unhealthy", Value: "unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	return d
}

func slice(node string, gen int64, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", node, gen, len(devs))},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, NodeName: &node,
			Pool:    resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
			Devices: devs,
		},
	}
}

// sliceOf is a slice of a pool of count slices.
func sliceOf(node string, gen, count int64, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
	s := slice(node, gen, devs...)
	s.Name += fmt.Sprintf("-of-%d", count)
	s.Spec.Pool.ResourceSliceCount = count
	return s
}

func node(name string, ready, schedulable bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Unschedulable: !schedulable},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func class(name, drv string) *resourceapi.DeviceClass {
	return gpudratest.Class(name, fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'gpu'", drv, drv))
}

// claim is a claim in namespace ns for count devices of class, created age
// ago.
func claim(ns, name, className string, age time.Duration) *resourceapi.ResourceClaim {
	c := gpudratest.WithUID(gpudratest.Claim(ns, name, gpudratest.Request("gpu", className, 1)), "uid-"+ns+"-"+name)
	c.CreationTimestamp = metav1.NewTime(now.Add(-age))
	return c
}

// allocated gives the claim an allocation of the devices (pool/device).
func allocated(c *resourceapi.ResourceClaim, admin bool, devs ...DeviceID) *resourceapi.ResourceClaim {
	var results []resourceapi.DeviceRequestAllocationResult
	for _, d := range devs {
		r := gpudratest.Result("gpu", driver, d.Pool, d.Device)
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		results = append(results, r)
	}
	return gpudratest.Allocate(c, results...)
}

// pod uses the claims by name; phase "" is Pending.
func pod(ns, name string, phase corev1.PodPhase, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pod-uid-" + name)}, Status: corev1.PodStatus{Phase: phase}}
	for i, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: ptr.To(c)})
	}
	return p
}
