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
//
// Driver (driver.go) is the plugin's life cycle and the kubelet's
// interface; it hands what it runs to types that each own one thing,
// under a lock of their own:
//
//   - publisher (publisher.go, publish.go): the node's ResourceSlices and
//     everything they are built from that no other type owns (the
//     inventory and its NVLink domain, fabric.go; the fallbacks when the
//     cluster drops fields; the GPUs in use; the MIG-ready GPUs), the
//     steps handed to the ResourceSlice controller and the republishes.
//     It holds the watch of the node's slices (sliceWatch,
//     slicewatch.go), the device plugin check (devicePluginCheck,
//     deviceplugin.go) and the fleet spares (fleetSpares, spares.go).
//   - healthTracker (health.go, sharing.go): the GPUs' health and the MPS
//     daemons that do not answer, and the kubelet's health streams.
//   - telemetry (telemetry.go, deviceinfo.go) samples the devices for the
//     metrics that deviceCollector (collector.go) exports.
//   - claimStatus (claimstatus.go) writes prepared claims' status, and
//     nodeEvents (sharing.go) records Events on the Node.
package plugin
