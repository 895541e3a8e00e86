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
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// Attribute names that gpudra publishes. The unqualified ones live in the
// driver's own domain (the driver name, gpu.gpudra.io by default), so a
// selector reads them as device.attributes['gpu.gpudra.io'].<name>. They are
// the one list that the kubelet plugin, the CEL harness, the DeviceClasses
// and the docs (doc.go) agree on: rename one here and everything follows.
const (
	// AttrType tells whole GPUs and MIG partitions apart (TypeGPU, or "mig"
	// once MIG placements are published), so that one selector can guard
	// attributes that only one kind of device carries.
	AttrType resourceapi.QualifiedName = "type"
	// AttrUUID is NVML's GPU UUID ("GPU-…").
	AttrUUID resourceapi.QualifiedName = "uuid"
	// AttrIndex is NVML's enumeration index; it can change across reboots.
	AttrIndex resourceapi.QualifiedName = "index"
	// AttrMinor is the minor number of /dev/nvidia<minor>.
	AttrMinor resourceapi.QualifiedName = "minor"
	// AttrProductName is NVML's product name, e.g. "NVIDIA H100 80GB HBM3".
	AttrProductName resourceapi.QualifiedName = "productName"
	// AttrBrand is NVML's brand, e.g. "Nvidia", "Tesla".
	AttrBrand resourceapi.QualifiedName = "brand"
	// AttrArchitecture is e.g. "Ampere", "Hopper", "Blackwell".
	AttrArchitecture resourceapi.QualifiedName = "architecture"
	// AttrCUDAComputeCapability is a version ("9.0" is published as 9.0.0).
	AttrCUDAComputeCapability resourceapi.QualifiedName = "cudaComputeCapability"
	// AttrDriverVersion is the NVIDIA kernel driver version as semver.
	AttrDriverVersion resourceapi.QualifiedName = "driverVersion"
	// AttrCUDADriverVersion is the newest CUDA version the driver supports.
	AttrCUDADriverVersion resourceapi.QualifiedName = "cudaDriverVersion"
	// AttrMigCapable is true when the GPU can be partitioned with MIG.
	AttrMigCapable resourceapi.QualifiedName = "migCapable"
	// AttrNVLinkGroup identifies the NVLink island; use it with
	// matchAttribute to get NVLink-connected GPUs.
	AttrNVLinkGroup resourceapi.QualifiedName = "nvlinkGroup"

	// Multi-node NVLink (GB200/GB300 NVL72 trays, docs/nvlink.md). A GPU
	// carries them only where every GPU of its node reports the NVLink
	// fabric COMPLETED and healthy, in one clique.
	//
	// AttrNVLinkDomain is "<clusterUUID>.<cliqueID>", NVML's fabric
	// cluster UUID and clique ID: the GPUs that reach each other's memory
	// over NVLink across nodes. The same value names the node's label
	// (NVLinkDomainLabel) and the domain's channel pool (ChannelPoolName).
	AttrNVLinkDomain resourceapi.QualifiedName = "nvlinkDomain"
	// AttrNVLinkClusterUUID is the fabric's cluster UUID alone (the NVLink
	// domain: a rack or a rack pair).
	AttrNVLinkClusterUUID resourceapi.QualifiedName = "nvlinkClusterUUID"
	// AttrNVLinkCliqueID is the fabric clique (the NVLink partition in the
	// domain; 32766 is the default partition spanning it).
	AttrNVLinkCliqueID resourceapi.QualifiedName = "nvlinkCliqueID"
	// AttrTrayIndex is the compute tray's index in its rack (NVML platform
	// info); stable across a tray's replacement.
	AttrTrayIndex resourceapi.QualifiedName = "trayIndex"
	// AttrModuleID is the GPU's module ID on its tray (NVML platform info).
	AttrModuleID resourceapi.QualifiedName = "moduleID"
	// AttrIMEXReady says whether the node's IMEX daemon answered READY
	// when the plugin last asked (every few seconds). Only whole GPUs of
	// a node in a domain carry it, and only where the plugin checks the
	// daemon (--imex-daemon=host); gpudra-controller turns it into the
	// IMEXReadyLabel that the channel pools select on.
	AttrIMEXReady resourceapi.QualifiedName = "imexReady"
	// AttrChannel is an IMEX channel's number, on the channel devices of
	// a domain's pool (TypeIMEXChannel).
	AttrChannel resourceapi.QualifiedName = "channel"

	// The standard attributes are defined by Kubernetes, so that
	// matchAttribute can align GPUs with NICs and other devices of other
	// drivers. They are fully qualified and computed by deviceattribute.
	AttrPCIBusID = deviceattribute.StandardDeviceAttributePCIBusID
	AttrPCIeRoot = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrNUMANode = deviceattribute.StandardDeviceAttributeNUMANode
)

// Variation says how an attribute's values differ between the GPUs of
// one model on two nodes that are otherwise alike (two machines of one
// type, two trays of one rack). An attribute not in Variations has the
// same value on every such GPU (type, productName, index, minor, …).
type Variation uint8

const (
	// PerGPU: an identity unique to each GPU (a UUID), different between
	// any two GPUs.
	PerGPU Variation = iota + 1
	// PerMachine: a GPU's address in its machine (PCI bus ID and root):
	// alike on two fake nodes of one profile, and on real machines of one
	// type as long as their boards, slots and firmware are, but free to
	// differ.
	PerMachine
	// PerTray: a tray's place in its rack, different between the trays
	// of one rack.
	PerTray
	// PerFabric: the NVLink fabric a tray belongs to: the same on the
	// trays of one domain, different between domains.
	PerFabric
)

// Variations are the attributes that differ between the GPUs of one model
// on two nodes otherwise alike, and how: the one list of them, next to
// the names. TestPublishedVariationsAreMarked (internal/fakenodes) fails
// when an attribute the slice builder publishes differs between two fake
// nodes of one profile and is missing here, or when a PerGPU, PerTray or
// PerFabric attribute does not differ where it should.
var Variations = map[resourceapi.QualifiedName]Variation{
	AttrUUID:              PerGPU,
	AttrParentUUID:        PerGPU,
	AttrPCIBusID:          PerMachine,
	AttrPCIeRoot:          PerMachine,
	AttrTrayIndex:         PerTray,
	AttrNVLinkDomain:      PerFabric,
	AttrNVLinkClusterUUID: PerFabric,
	AttrNVLinkCliqueID:    PerFabric,
}

// Identity reports whether attributes that vary so are identities: values
// that tell apart the devices of nodes that are otherwise alike, and that
// gpudra-controller's fleet accounting ignores (IdentityAttributes). A
// fabric is not one: nodes of two NVLink domains are not alike.
func (v Variation) Identity() bool { return v == PerGPU || v == PerMachine || v == PerTray }

// IdentityAttributes are the attributes whose values tell apart the
// devices of nodes that are otherwise alike (Variations whose Identity
// holds), sorted: a GPU's UUID (and its partitions' parentUUID), its PCI
// address and root, a tray's index in its rack. gpudra-controller's fleet
// accounting groups nodes into classes, and their slices into shapes,
// ignoring them (internal/fleet): an attribute that differs from node to
// node of one machine type and is missing here makes every node a class
// and a shape of its own, so the controller's work and memory grow with
// the fleet (TestPublishedVariationsAreMarked,
// TestNodesOfOneProfileAreOneClass). Their values are strings or
// integers.
var IdentityAttributes = func() []resourceapi.QualifiedName {
	var out []resourceapi.QualifiedName
	for a, v := range Variations {
		if v.Identity() {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}()

// PartitionParentAttributes are the whole GPU's attributes that each of
// its MIG partitions carries too, with the GPU's values: those NVIDIA's
// DRA driver publishes on its MIG devices (CommonAttributesMig in
// k8s-dra-driver-gpu's cmd/gpu-kubelet-plugin/mig.go: productName, brand,
// architecture, cudaComputeCapability, driverVersion, cudaDriverVersion
// and the standard pciBusID and pcieRoot), so that a selector migrated
// from NVIDIA's mig.nvidia.com evaluates on gpudra's partitions instead
// of failing with "no such key", which fails the scheduler's whole
// attempt. Not the GPU's identities as a GPU (uuid, index, minor), nor
// what a partition claim has no use for and NVIDIA does not publish on
// partitions either (migCapable, nvlinkGroup, the NUMA node, the NVLink
// domain): every attribute is bytes in every slice of a node that keeps
// a spare, and a map entry in every CEL evaluation of the partition.
// A partition carries one of them whenever its GPU does (pcieRoot only
// where sysfs tells it). gpudra-controller's spare accounting
// (internal/fleet) copies them from a spare GPU's own whole device.
var PartitionParentAttributes = []resourceapi.QualifiedName{
	AttrProductName, AttrBrand, AttrArchitecture, AttrCUDAComputeCapability,
	AttrDriverVersion, AttrCUDADriverVersion, AttrPCIBusID, AttrPCIeRoot,
}

// Capacity names. Memory is a capacity, not an attribute, so that selectors
// compare quantities (compareTo(quantity('40Gi'))) and, later, consumable
// capacity can draw from it.
const (
	// CapMemory is the framebuffer size in bytes.
	CapMemory resourceapi.QualifiedName = "memory"
	// CapMultiprocessors is the number of streaming multiprocessors.
	CapMultiprocessors resourceapi.QualifiedName = "multiprocessors"
)

// TypeGPU is the value of AttrType on a whole GPU.
const TypeGPU = "gpu"

// TypeIMEXChannel is the value of AttrType on an IMEX channel device of an
// NVLink domain's pool.
const TypeIMEXChannel = "imex-channel"

// ChannelPoolPrefix starts the name of every NVLink domain's channel pool,
// which gpudra-controller publishes: "nvlink/<domain>".
const ChannelPoolPrefix = "nvlink/"

// ChannelPoolName is the pool of the IMEX channels of an NVLink domain
// (an AttrNVLinkDomain value).
func ChannelPoolName(domain string) string { return ChannelPoolPrefix + domain }

// NVLinkDomainLabel is the Node label that carries the node's NVLink
// domain (an AttrNVLinkDomain value), e.g. "gpu.gpudra.io/nvlink-domain",
// for node selectors, Kueue TAS and topology-aware scheduling, and for
// the channel pools' node selectors. Its domain is the driver name, as
// for the taint key.
func NVLinkDomainLabel(driverName string) string {
	return driverName + "/nvlink-domain"
}

// IMEXReadyLabel is the Node label, "true" or absent, that says the
// node's IMEX daemon can serve new multi-node work: gpudra-controller sets
// it on a node of a domain unless the node's GPUs say the daemon is not
// ready (AttrIMEXReady false; a plugin that does not check the daemon
// publishes no AttrIMEXReady, and its node counts as ready). The channel
// pools select on it, so a node whose daemon stopped answering takes no
// new pod that holds a channel, while its GPUs stay usable for
// single-node work.
func IMEXReadyLabel(driverName string) string {
	return driverName + "/imex-ready"
}

// ChannelDeviceName names channel n of a domain's pool: "channel-<n>".
func ChannelDeviceName(n int) string { return fmt.Sprintf("channel-%d", n) }

// UnhealthyTaintValue is the value of the health taint. It names no cause on
// purpose: a cause that changes from one XID to the next would turn every
// new error on an already unhealthy GPU into an API write.
const UnhealthyTaintValue = "unhealthy"

// UnhealthyTaintKey is the device-taint key that marks an unhealthy GPU:
// "<driver name>/unhealthy", e.g. "gpu.gpudra.io/unhealthy". The domain comes
// from the driver name so that two gpudra instances with different names
// (side by side, or beside another GPU driver) never share taint keys, and a
// toleration names the driver it means.
func UnhealthyTaintKey(driverName string) string {
	return driverName + "/unhealthy"
}
