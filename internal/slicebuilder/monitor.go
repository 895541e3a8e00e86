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

package slicebuilder

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
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
// "monitor": the same GPU, with the whole GPU's attributes and capacities
// (so that any selector written for whole GPUs evaluates on it without an
// error), no counters, and no health taint (a monitor keeps watching a sick
// GPU). The DeviceClass gpu-monitoring.gpudra.io selects them.
//
// Two guards keep workloads off them. They carry the NoSchedule taint
// <driver>/monitoring-only, which only a request that tolerates it gets
// past, so a claim of a broad class (device.driver == '...' alone) is never
// handed one; and the plugin prepares one only for an admin-access request
// (the namespace must be labelled resource.kubernetes.io/admin-access=true),
// so a workload cannot use one to reach a GPU that someone else holds. They
// go last in the pool, where no workload's claim walks them before what it
// asks for.

// MonitoringTaintValue is the value of the monitoring devices' taint.
const MonitoringTaintValue = "admin-access"

// MonitoringTaintKey is the key of the taint on monitoring devices:
// "<driver name>/monitoring-only".
func MonitoringTaintKey(driverName string) string { return driverName + "/monitoring-only" }

// monitorDevice is the GPU's monitoring device. It has every attribute
// of the whole GPU, so that a selector written for whole GPUs evaluates on
// it without a run-time error (the allocator evaluates a request's
// selectors on every device it walks, tainted or not, and one error fails
// the whole attempt).
func monitorDevice(g gpu.GPU, shared gpuAttributes, driverName string) (resourceapi.Device, error) {
	return gpuDevice(g, shared, g.MonitorDeviceName(), TypeMonitor, []resourceapi.DeviceTaint{{
		Key:    MonitoringTaintKey(driverName),
		Value:  MonitoringTaintValue,
		Effect: resourceapi.DeviceTaintEffectNoSchedule,
	}})
}
