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

// Package slicebuilder is gpudra's slice builder: it turns the device model
// (package gpu) into the ResourceSlices that the kubelet plugin publishes
// with kubeletplugin.Helper.PublishResources.
//
// # Pool and slice layout
//
// One pool per node, named after the node, in a number of slices that
// depends on the GPUs only (but in fleet mode's compact layout): whole GPUs first, sorted by minor number, cut
// into slices of at most ResourceSliceMaxDevicesWithAdvancedFeatures (64)
// devices; then the MIG counter sets; then one slice per partitionable
// GPU for its MIG placements, highest minor first, empty while the GPU
// does not publish them; then the monitoring devices. In fleet mode a node
// none of whose GPUs publishes placements leaves out the empty slices but
// one counter slice (the compact layout). A node with no GPUs
// publishes one empty slice. The allocator walks slices in name order,
// first fit, and the ResourceSlice controller names slices by their
// position, so the position is a priority. See poolLayout.
//
// # Whole-GPU devices
//
// A whole GPU is published as device gpu-<minor> (gpu.WholeDeviceName).
// Unqualified names are in the driver's domain (gpu.gpudra.io by default):
// a selector reads device.attributes['gpu.gpudra.io'].productName.
//
//	attribute                          type     meaning
//	---------------------------------  -------  ------------------------------------------------
//	type                               string   "gpu" for a whole GPU
//	uuid                               string   NVML UUID, "GPU-…"
//	index                              int      NVML index (may change across reboots)
//	minor                              int      minor number of /dev/nvidia<minor>
//	productName                        string   e.g. "NVIDIA H100 80GB HBM3"
//	brand                              string   e.g. "Nvidia", "Tesla"
//	architecture                       string   e.g. "Ampere", "Hopper", "Blackwell"
//	cudaComputeCapability              version  "9.0" → 9.0.0
//	driverVersion                      version  kernel driver, "560.28.03" → 560.28.3
//	cudaDriverVersion                  version  newest CUDA the driver supports, "12.4" → 12.4.0
//	migCapable                         bool     the GPU supports MIG
//	nvlinkGroup                        int      NVLink island (lowest index in it); use with matchAttribute
//	nvlinkDomain                       string   "<clusterUUID>.<cliqueID>": the multi-node NVLink domain; only on nodes in one
//	nvlinkClusterUUID                  string   the fabric's cluster UUID (rack or rack pair); only on nodes in a domain
//	nvlinkCliqueID                     int      the fabric's clique (NVLink partition; 32766 the default); only on nodes in a domain
//	trayIndex                          int      the compute tray's index in its rack; only on nodes in a domain
//	moduleID                           int      the GPU's module on its tray; only on nodes in a domain
//	imexReady                          bool     the node's IMEX daemon answered READY when last asked; only on nodes in a domain whose plugin checks it
//	resource.kubernetes.io/pciBusID    string   "0000:1b:00.0"; omitted if discovery has none
//	resource.kubernetes.io/pcieRoot    string   "pci0000:00"; omitted if sysfs cannot tell
//	resource.kubernetes.io/numaNode    int      NUMA node; omitted if sysfs has none (or -1)
//
// A node is in a multi-node NVLink domain (a GB200/GB300 NVL72 rack's
// partition) only when every GPU reports the fabric probe COMPLETED with
// status SUCCESS, a non-zero cluster UUID, a health that is not UNHEALTHY,
// and one clique (gpu.Node.NVLinkDomain). Its whole GPUs and their
// monitoring devices then carry the five domain attributes; its MIG
// placements do not. Every other node publishes none of them, so a
// claim keeps its GPUs in one domain with matchAttribute (which a missing
// key does not fail), and a selector reads the attribute as
// device.attributes["gpu.gpudra.io"].?nvlinkDomain.orValue(""): a plain
// read fails on the GPUs of every other node, and with them the
// scheduler's whole attempt.
//
//	capacity         unit   meaning
//	---------------  -----  -----------------------------------------------
//	memory           bytes  framebuffer memory as NVML reports it, e.g. 81559Mi (H100 80GB)
//	multiprocessors  count  streaming multiprocessors; omitted when unknown
//
// Versions are strict semver (NormalizeVersion): pad to three parts, drop
// leading zeros. Compare them with semver():
// device.attributes['gpu.gpudra.io'].driverVersion.isGreaterThan(semver('550.0.0')).
//
// # MIG partitions
//
// A MIG-capable GPU that can be partitioned (Partitionable: MIG mode on, or
// switchable without a reset) gets, while its placements are published, a
// counter set gpu-<minor>-counters, which its whole-GPU device consumes
// entirely: one counter per memory slice, and one per profile the GPU
// holds fewer instances of than it has placements (the counters that can
// refuse a combination; buildMIG). While its placements are not
// published, nothing else can take a share of the GPU: no counter set is
// published for it and its whole device consumes none (the allocator's
// allocated-devices check alone keeps it exclusive), so it costs the
// scheduler no counter conversion or check. Its place among the counter
// slices is fixed (layout.go), and NextStep publishes a set before its
// whole device consumes it and drops it only after. Its
// placements, one device of type "mig" per profile × placement,
// gpu-<minor>-mig-<profile token>-<start> (gpu.MigDeviceName), each
// consuming its memory slices, are published only while the GPU can take
// the next partition claims (Plan, ready.go): while claims hold partitions
// of it, and on SpareGPUs free GPUs of the node. Attributes: type,
// profile, parentUUID, and the GPU's PartitionParentAttributes (productName,
// brand, architecture, cudaComputeCapability, driverVersion,
// cudaDriverVersion, the standard pciBusID and pcieRoot: what NVIDIA's
// MIG devices carry);
// capacities: memory, multiprocessors, copyEngines, decoders, encoders,
// jpegEngines, ofaEngines. Options.AdminInstances hides what an admin's
// instances overlap; Options.WholeGPUsOnly publishes no counters at all.
// See docs/mig.md.
//
// # Shared GPUs and monitoring devices
//
// With Options.ConsumableCapacity a whole GPU allows multiple allocations
// and each claim consumes a share of its memory and multiprocessors
// (shared.go). Every GPU is also published as gpu-<minor>-monitor, of type
// "monitor", for monitoring pods with admin access: no counters, no
// health taint, and a taint that keeps workloads off it (monitor.go).
//
// # Health
//
// A GPU whose health is gpu.Unhealthy carries the device taint
// <driver name>/unhealthy=unhealthy:NoSchedule (gpu.gpudra.io/unhealthy by
// default). The scheduler stops allocating it; a claim that must use it
// anyway can tolerate the taint.
//
// # Steady state
//
// Build is deterministic: the same node, health and use give DeepEqual
// output, so republishing it causes no API writes. One GPU's health
// change rewrites the slice of its whole GPU and, if its placements are
// published, their slice; a GPU whose placements are not published costs
// no write taken or given back; a spare taken makes the next GPU a spare,
// which rewrites the counter slice, the whole GPUs' slice and that GPU's
// partition slice (three single-slice writes); a spare taken whole also
// hides its placements and drops its counter set (five writes in all).
// No change adds or removes a slice, so none starts a new pool
// generation, and NextStep keeps the pool valid after every write.
package slicebuilder
