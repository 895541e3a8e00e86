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

// Package cdispec writes the CDI (Container Device Interface) spec files
// through which containers receive gpudra's devices: one transient spec file
// per prepared claim, vendor "k8s.<driver name>", class "claim".
//
// Per-claim specs (rather than one spec for all GPUs of the node) carry what
// is specific to the claim, such as its driver capabilities or sharing
// limits, and are removed with the claim, so that a container runtime can
// never inject a device for a claim that is no longer prepared.
//
// Specs are produced with the CDI library (tags.cncf.io/container-device-
// interface), which validates them and writes them atomically (temporary
// file and rename), so a runtime never reads a half-written spec.
package cdispec
