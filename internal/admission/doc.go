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

// Package admission validates gpudra's opaque device configs when a
// ResourceClaim, ResourceClaimTemplate or DeviceClass is created or
// changed, so that a misspelt field is rejected at `kubectl apply` with the
// field and the fix, instead of leaving a pod in ContainerCreating when the
// kubelet plugin meets the config at prepare time.
//
// It decodes with claimplan.DecodeConfig, the part of the plugin's
// prepare-time decision that needs no allocation (the config API's own
// Decode, and the per-device MPS limits no allocation could satisfy), the
// one the plugin's prepare and gpudra check use, so every field the API
// gains is validated here without a change to this package, and the
// webhook can never accept a config the plugin would reject whatever the
// scheduler allocates, nor reject one it would accept.
//
// Only configs whose opaque.driver is gpudra's driver name are read:
// other drivers' configs pass untouched. The object's JSON is read through
// the few fields the config sits under (spec.devices.config for a claim,
// spec.spec.devices.config for a template, spec.config for a class), which
// have the same shape in resource.k8s.io v1, v1beta2 and v1beta1, so one
// reader serves every version the API server may send.
//
// An UPDATE whose configs of this driver equal the old object's is allowed
// without decoding: otherwise an object created before the webhook was
// installed (or under an older gpudra) could never lose its finalizer, and
// could not be deleted.
//
// Any pod that reaches the webhook's Service can send it requests, so each
// is bounded by what the API server can send (limits.go): its time, its
// size, its configs (their count and size are the API's own limits), the
// causes of a denial, and the memory all reviews in flight hold together.
// A request past them did not come from the API server and is refused
// unread.
//
// What depends on the devices the scheduler picks (the config's kind
// fitting the device, MPS on one device per claim, what other claims on
// the GPU hold) is decided by the plugin at prepare (internal/claimplan), and
// offline by gpudra check, not here.
package admission
