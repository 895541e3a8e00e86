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

// Package simulate runs gpudra's whole node pipeline in one process, with no
// cluster: the real kubelet plugin serves its gRPC sockets in a temp dir and
// publishes ResourceSlices to a fake clientset; the real scheduler allocator
// (k8s.io/dynamic-resource-allocation/structured) allocates claims against
// those slices; a stand-in kubelet calls NodePrepareResources and
// NodeUnprepareResources over the socket; and the CDI specs on disk are
// injected into an OCI spec with the CDI library, to show what each container
// receives.
//
// `gpudra simulate` and the in-process integration tests both use it.
package simulate
