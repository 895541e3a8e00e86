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

// Package check is gpudra check: the offline CEL selector and allocation
// harness. It reads DeviceClasses, ResourceClaimTemplates, ResourceClaims,
// Pods (plain, or the pod templates of workloads) and ResourceSlices
// through the offline scheduler core (internal/scheduler), compiles every
// selector as the API server does (k8s.io/dynamic-resource-allocation/cel,
// the NewExpressions environment, cost and length limits), evaluates each
// on every device, validates gpudra's opaque configs with the config API's
// own decoder (as the kubelet plugin's prepare does), and schedules each
// pod's claims (with the claim for its extended resources) through the
// core, with the real allocator and the feature set of one Kubernetes
// version. The API server's validation is applied as the core reads the
// objects; each allocated claim then goes through the kubelet plugin's
// own prepare-time decision (internal/claimplan), against the node read back
// from the slices and what earlier claims hold (prepare.go). What it
// finds comes back as a Report: located findings of a severity (error,
// warning, note) with hints, the devices each class and request matches,
// and each claim's allocation or why it can never be satisfied (or
// prepared).
//
// The inventory is ResourceSlices: those among the inputs, and those the
// caller passes in Options.Slices (gpudra check builds them for fake nodes
// with internal/fakenodes, through the plugin's own slice builder). The
// inventory drives the hints: an attribute "no device publishes" is one
// that no device of the inventory carries, so the checks hold for any
// driver, partitionable devices and shared counters included.
//
// Run's stages each have a type that owns their state, given what it
// reads explicitly:
//
//   - findingLog (findings.go): the report's findings, each once, with
//     its severity and line;
//   - evaluator (evaluator.go, evaluate.go, classes.go, hints.go,
//     configs.go): the DeviceClasses and CEL selectors as evaluated on
//     every device, and the hints built from the results;
//   - unitBuilder (units.go, claims.go, extended.go, admin.go,
//     nodename.go, podgroups.go): the units allocated at once, one per
//     pod or lone claim, with the checks of their claims; quotaChecker
//     (quota.go) charges them against the inputs' ResourceQuotas;
//   - runner (check.go, allocate.go, gangs.go, republish.go): the
//     allocation itself, what the claims allocated so far hold (state),
//     gangs and MIG spares;
//   - publisher (republish.go): what the nodes publish as claims are
//     prepared on them; preparer (prepare.go): what the nodes' plugins
//     prepared, and what they would refuse;
//   - explainer (explainer.go, explain.go): why a request cannot be
//     allocated, for the state of the moment; pendingLog (explain.go):
//     one finding for the replicas of a workload that stay Pending;
//   - nvlinkDomains (nvlink.go): which claims and gangs ask for an NVLink
//     domain's IMEX channels.
//
// The inventory (inventory_index.go) indexes the devices by pool and
// node.
//
// Like the core, this package links neither the kubelet plugin, nor gRPC,
// nor NVML (internal/scheduler's TestNoPluginGRPCOrNVML).
package check
