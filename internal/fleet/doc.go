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

// Package fleet accounts for a cluster's gpudra devices from what the API
// server holds: ResourceSlices (what the kubelet plugins publish),
// ResourceClaims (what the scheduler allocated and what waits), Pods and
// Nodes. It is what gpudra-controller exports as fleet metrics.
//
// Everything here is a pure function of its Inputs, so each figure is
// tested on constructed fleets with known answers:
//
//   - devices published, allocated and tainted, per node, model (the
//     productName attribute), type (gpu or mig) and MIG profile; published
//     ones also exclusive or shareable, allocated ones by the sharing
//     their configs ask for (sharing.go);
//   - GPUs per node and model that are free, allocated whole, or
//     partitioned (at least one MIG partition allocated);
//   - claims allocated, and claims pending for this driver with the age of
//     the oldest.
//
// A pending claim is one no allocation has been made for yet while a pod
// that is not finished uses it (a claim nobody uses is never allocated,
// and waits for nothing). It is this driver's when one of its requests
// names a DeviceClass whose selectors compare device.driver to the
// driver's name, or that carries a config for the driver.
//
// Only the newest generation of each pool counts: while a plugin replaces
// its slices, the older generation is on its way out.
package fleet
