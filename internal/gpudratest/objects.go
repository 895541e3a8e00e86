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

package gpudratest

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Builders of the DRA objects tests make over and over. Each returns a
// fresh object that the test may change; none sets more than its
// arguments say (no defaulting, no UID unless asked for).

// Request is an exact request for count devices of the class, with CEL
// selectors (the allocation mode is ExactCount).
func Request(name, class string, count int64, selectors ...string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           count,
		Selectors:       CEL(selectors...),
	}}
}

// CEL makes a device selector of each expression.
func CEL(expressions ...string) []resourceapi.DeviceSelector {
	var out []resourceapi.DeviceSelector
	for _, e := range expressions {
		out = append(out, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return out
}

// Claim is a ResourceClaim in the namespace with the requests.
func Claim(namespace, name string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
}

// Opaque is a claim's opaque config for the driver (params is its JSON),
// for the named requests (none: every request).
func Opaque(driver, params string, requests ...string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: OpaqueConfig(driver, params)}
}

// OpaqueConfig is the opaque device configuration of Opaque, for the
// places that take one directly (DeviceClasses, allocation results).
func OpaqueConfig(driver, params string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)},
	}}
}

// Class is a DeviceClass with CEL selectors.
func Class(name string, selectors ...string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{Selectors: CEL(selectors...)}}
}

// Result is one device of an allocation: the request it went to and the
// device by driver, pool and name.
func Result(request, driver, pool, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: pool, Device: device}
}

// Allocate gives the claim an allocation of the results, as the
// scheduler leaves it (no node selector, no configs), and returns it.
func Allocate(claim *resourceapi.ResourceClaim, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	return claim
}

// WithUID sets the claim's UID and returns it.
func WithUID(claim *resourceapi.ResourceClaim, uid string) *resourceapi.ResourceClaim {
	claim.UID = types.UID(uid)
	return claim
}

// Pod is a pod in the namespace with one container, "ctr", that uses
// every named ResourceClaim (pod claim name = claim name).
func Pod(namespace, name string, claims ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	ctr := v1.Container{Name: "ctr"}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: &c})
		ctr.Resources.Claims = append(ctr.Resources.Claims, v1.ResourceClaim{Name: c})
	}
	pod.Spec.Containers = []v1.Container{ctr}
	return pod
}
