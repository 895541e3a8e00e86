package slicebuilder

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// TypeMonitor is the value of AttrType on a GPU's monitoring device.
const TypeMonitor = "monitor"

// Monitoring pods (a DCGM exporter, a node agent) ask for every GPU of
// their node with DRA admin access, which lets them share devices that
// workloads hold. On a partitionable GPU that does not work through the
// whole-GPU device: the Kubernetes allocator (k8s.io/dynamic-resource-
// allocation v0.37.2, incubating) checks a device's counter consumption
// even for an admin-access request, and a GPU in use, whole or partitioned,
// has its counters consumed, so the request fails on every busy GPU.
//
// Each GPU is therefore also published as gpu-<minor>-monitor, of type
// "monitor": the same GPU, no counters, no health taint (a monitor keeps
// watching a sick GPU), and only the attributes a monitoring selector
// needs. The DeviceClass gpu-monitoring.gpudra.io selects them; the plugin
// prepares one only for an admin-access request (the namespace must be
// labelled resource.kubernetes.io/admin-access=true), so a workload cannot
// use it to reach a GPU that someone else holds. They go last in the pool,
// where no workload's claim walks them before what it asks for.

// monitorDevice is the GPU's monitoring device.
func monitorDevice(g gpu.GPU, shared gpuAttributes) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrType:        stringAttr(TypeMonitor),
		AttrUUID:        stringAttr(g.UUID),
		AttrIndex:       intAttr(int64(g.Index)),
		AttrMinor:       intAttr(int64(g.Minor)),
		AttrProductName: shared.attrs[AttrProductName],
	}
	return resourceapi.Device{Name: g.MonitorDeviceName(), Attributes: attrs}
}
