// Package plugin is gpudra's kubelet plugin: it implements
// kubeletplugin.DRAPlugin on top of the node state, publishes the node's
// ResourceSlices, registers with the kubelet and reports device health.
package plugin
