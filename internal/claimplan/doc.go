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

// Package claimplan is the one answer to "would the node prepare this
// claim?": the checks gpudra's kubelet plugin makes at prepare that need
// the claim's allocation, its configs and what other claims on the node
// hold, but no hardware. The node state (internal/nodestate) calls it before it
// records or creates anything; gpudra check calls it on the allocations it
// computes (and, with --sequential, on what earlier claims hold); gpudra
// simulate runs the plugin, so it calls it too; and the admission webhook
// decodes configs through DecodeConfig, its part that needs no allocation.
// So none of them can pass what another refuses.
//
// Plan resolves an allocation into the node's devices, decodes the
// configs that apply to each (class configs first, the claim's over them)
// and says how each device is shared; HeldConflict says whether a planned
// device can be prepared while another claim holds a device of the same
// GPU. Every refusal is a *Refusal of a Kind; Kinds lists them all, with
// what gpudra check can know of each.
//
// The package is pure: the device model, the config API and the
// resource.k8s.io types, no NVML, no gRPC, no client-go.
package claimplan
