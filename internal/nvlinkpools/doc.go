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

// Package nvlinkpools is gpudra-controller's half of multi-node NVLink
// (docs/nvlink.md): it labels each Node with its NVLink domain and
// publishes one ResourceSlice pool of IMEX channels per domain.
//
// Two derivations, one writer (the leader):
//
//   - Node label. A Node's label NVLinkDomainLabel(driver) follows the
//     nvlinkDomain attribute of the GPUs in the node's own ResourceSlices
//     (all of them agree, or the node gets no label). Only that label is
//     patched; nothing else of the Node is written.
//   - Channel pools. Every domain that at least one labelled Node carries
//     gets the pool ChannelPoolName(domain): cluster-scoped slices whose
//     node selector is the domain label, with channel-1…channel-N
//     (exclusive: one job each) and channel-0 (allowMultipleAllocations:
//     the shared channel cooperative jobs opt into). The slices are
//     written by the real ResourceSlice controller of
//     k8s.io/dynamic-resource-allocation, as the plugins write theirs.
//
// Pool membership is the label, so a node joining or leaving a domain
// writes no slice: a pool is created when its domain gets its first
// labelled node and deleted when it loses its last one. Nothing is
// written per job.
package nvlinkpools
