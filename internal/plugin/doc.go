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

// Package plugin is gpudra's kubelet plugin: it implements
// kubeletplugin.DRAPlugin on top of the node state, publishes the node's
// ResourceSlices, registers with the kubelet, reports device health (GPU
// XIDs, and the MPS daemons it supervises), follows the GPUs' multi-node
// NVLink fabric (fabric.go), serves its gRPC health service and exports
// per-device metrics.
package plugin
