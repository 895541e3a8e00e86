// Package plugin is gpudra's kubelet plugin: it implements
// kubeletplugin.DRAPlugin on top of the node state, publishes the node's
// ResourceSlices, registers with the kubelet, reports device health (GPU
// XIDs, and the MPS daemons it supervises), serves its gRPC health service
// and exports per-device metrics.
package plugin
