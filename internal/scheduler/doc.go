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

// Package scheduler is gpudra's offline scheduler core: what the
// Kubernetes control plane would do with DRA objects, without a cluster.
// `gpudra check`, `gpudra simulate` and the controller's stranded-GPU
// accounting all go through it, so that they never disagree about what the
// scheduler would do.
//
// It holds:
//
//   - decoding manifests as the API server does (Manifests, LoadPaths,
//     LoadFS): strict field validation, with each unknown or duplicated
//     field reported at its file and line (Source.At resolves a field
//     path to a line); resource.k8s.io v1beta1 and v1beta2 objects
//     converted to v1; the pod templates of Deployments, ReplicaSets,
//     StatefulSets, DaemonSets, ReplicationControllers, Jobs and CronJobs
//     read as pods; objects of kinds it does not read skipped with a note,
//     never an abort;
//   - the API server's defaulting (DefaultClaimSpec, DefaultPod) and the
//     resourceclaim controller's claims from templates
//     (ClaimFromTemplate);
//   - the DRA feature set of each Kubernetes version (FeaturesFor): the
//     allocator's features, the CEL environment, DRAExtendedResource and
//     DRADeviceTaintRules;
//   - the DeviceClasses the scheduler sees (Classes), including the
//     mapping of extended resource names to classes, and the special
//     claim the scheduler makes for a pod's extended resources
//     (Scheduler.ExtendedResources);
//   - allocating a pod's claims together, with the real allocator
//     (k8s.io/dynamic-resource-allocation/structured), on the first node
//     where they fit, against the devices other claims hold
//     (Scheduler.Schedule, State), bounded by the scheduler's filter
//     timeout; DeviceTaintRules applied to the inventory when the version
//     enables them.
//
// The inventory is ResourceSlices, from wherever the caller has them: a
// cluster, a file, or gpudra's slice builder on fake nodes (internal/fakenodes).
// This package imports neither the kubelet plugin, nor gRPC, nor NVML: a
// test keeps it so, as it keeps internal/check.
package scheduler
