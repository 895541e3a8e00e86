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

package gpu

import (
	"fmt"
	"strings"
)

// A GPU of a GB200/GB300 NVL72 rack sits in a multi-node NVLink fabric:
// the fabric manager probes it and tells it its cluster UUID (the NVLink
// domain, a rack or rack pair) and clique ID (the NVLink partition in
// it). GPUs of one cluster and clique reach each other's memory over
// NVLink across nodes, through IMEX channels. A GPU of an NVSwitch system
// outside such a fabric (a DGX H100) reports the probe completed with a
// zero cluster UUID; older GPUs do not answer at all.

// FabricState is the fabric manager's probe of a GPU, NVML's
// nvmlGpuFabricState_t by name.
type FabricState string

const (
	FabricNotSupported FabricState = "NOT_SUPPORTED"
	FabricNotStarted   FabricState = "NOT_STARTED"
	FabricInProgress   FabricState = "IN_PROGRESS"
	FabricCompleted    FabricState = "COMPLETED"
	// FabricUnknown: NVML failed to answer (the error is in Status).
	FabricUnknown FabricState = "UNKNOWN"
)

// FabricHealth is NVML's fabric health summary by name; "" when the GPU
// does not report one (NOT_SUPPORTED, or a driver without the field).
type FabricHealth string

const (
	FabricHealthy         FabricHealth = "HEALTHY"
	FabricUnhealthy       FabricHealth = "UNHEALTHY"
	FabricLimitedCapacity FabricHealth = "LIMITED_CAPACITY"
)

// ZeroClusterUUID is how the driver says "not in a fabric cluster".
const ZeroClusterUUID = "00000000-0000-0000-0000-000000000000"

// Fabric is what a GPU reports of its multi-node NVLink fabric.
type Fabric struct {
	// State is FabricNotSupported on a GPU that has no fabric.
	State FabricState
	// Status is the probe's result, "SUCCESS" or NVML's error text; it
	// means something only once State is FabricCompleted.
	Status string
	// ClusterUUID is the NVLink domain, lower-case UUID form.
	ClusterUUID string
	// CliqueID is the NVLink partition within the domain.
	CliqueID uint32
	Health   FabricHealth
}

// Platform is where the GPU sits in its rack (NVML's platform info, on
// Blackwell and later) and on its board.
type Platform struct {
	// Known is true when the GPU answered the platform query; the fields
	// below it are zero otherwise.
	Known         bool
	ChassisSerial string
	SlotNumber    int
	TrayIndex     int
	HostID        int
	// ModuleID is the GPU's module on its board (nvmlDeviceGetModuleId);
	// ModuleIDKnown is false where the GPU does not say.
	ModuleID      int
	ModuleIDKnown bool
}

// inFabricCluster reports whether the GPU says it is in a multi-node
// fabric: a cluster UUID, or a probe still running (which on a fabric
// node is every GPU's state until the fabric manager is done).
func (f Fabric) inFabricCluster() bool {
	switch f.State {
	case FabricNotStarted, FabricInProgress:
		return true
	case FabricCompleted:
		return f.ClusterUUID != "" && f.ClusterUUID != ZeroClusterUUID
	default:
		return false
	}
}

// DomainReason says, in a word fit for a metric label, why a node whose
// GPUs are in a multi-node fabric is not in an NVLink domain.
type DomainReason string

const (
	ReasonNotCompleted   DomainReason = "not_completed"
	ReasonProbeFailed    DomainReason = "probe_failed"
	ReasonNoClusterUUID  DomainReason = "no_cluster_uuid"
	ReasonUnhealthy      DomainReason = "unhealthy"
	ReasonCliquesDiffer  DomainReason = "cliques_differ"
	ReasonFabricUnknown  DomainReason = "unreadable"
	ReasonNotEveryGPU    DomainReason = "not_every_gpu"
	ReasonClustersDiffer DomainReason = "clusters_differ"
)

// DomainReasons are every DomainReason, for metrics that zero the others.
var DomainReasons = []DomainReason{ReasonNotCompleted, ReasonProbeFailed, ReasonNoClusterUUID, ReasonUnhealthy,
	ReasonCliquesDiffer, ReasonClustersDiffer, ReasonFabricUnknown, ReasonNotEveryGPU}

// NVLinkDomain is a node's place in a multi-node NVLink fabric.
type NVLinkDomain struct {
	// Fabric is true when the node's GPUs are in a multi-node fabric at
	// all; false on every node that is not a GB200/GB300-class tray.
	Fabric bool
	// Name is "<clusterUUID>.<cliqueID>" when the node is in a domain,
	// "" otherwise. ClusterUUID and CliqueID are its parts.
	Name        string
	ClusterUUID string
	CliqueID    uint32
	// Reason and Message say why a fabric node is not in a domain:
	// Reason in a word, Message in a sentence naming the GPU.
	Reason  DomainReason
	Message string
}

// InDomain reports whether the node is in an NVLink domain.
func (d NVLinkDomain) InDomain() bool { return d.Name != "" }

// NVLinkDomain decides the node's NVLink domain from its GPUs' fabric
// readings. The node is in one only when every GPU reports the probe
// COMPLETED with status SUCCESS, a non-zero cluster UUID, a health that is
// not UNHEALTHY, and all GPUs the same cluster and clique: a job given one
// of its GPUs can then reach every GPU of the domain. This is the one
// place that decides it.
func (n Node) NVLinkDomain() NVLinkDomain {
	fabric := false
	for _, g := range n.GPUs {
		fabric = fabric || g.Fabric.inFabricCluster()
	}
	if !fabric {
		return NVLinkDomain{}
	}
	notIn := func(reason DomainReason, g GPU, format string, args ...any) NVLinkDomain {
		return NVLinkDomain{Fabric: true, Reason: reason, Message: g.DeviceName() + ": " + fmt.Sprintf(format, args...)}
	}
	first := n.GPUs[0]
	for _, g := range n.GPUs {
		f := g.Fabric
		switch {
		case f.State == FabricUnknown:
			return notIn(ReasonFabricUnknown, g, "fabric info unreadable: %s", f.Status)
		case f.State == FabricNotSupported:
			return notIn(ReasonNotEveryGPU, g, "reports no NVLink fabric, unlike the node's other GPUs")
		case f.State != FabricCompleted:
			return notIn(ReasonNotCompleted, g, "fabric state %s", f.State)
		case f.Status != "SUCCESS":
			return notIn(ReasonProbeFailed, g, "fabric probe failed: %s", f.Status)
		case f.ClusterUUID == "" || f.ClusterUUID == ZeroClusterUUID:
			return notIn(ReasonNoClusterUUID, g, "no NVLink cluster UUID, unlike the node's other GPUs")
		case f.Health == FabricUnhealthy:
			return notIn(ReasonUnhealthy, g, "fabric health %s", f.Health)
		case !strings.EqualFold(f.ClusterUUID, first.Fabric.ClusterUUID):
			return notIn(ReasonClustersDiffer, g, "in NVLink cluster %s, %s in %s", f.ClusterUUID, first.DeviceName(), first.Fabric.ClusterUUID)
		case f.CliqueID != first.Fabric.CliqueID:
			return notIn(ReasonCliquesDiffer, g, "in clique %d, %s in clique %d", f.CliqueID, first.DeviceName(), first.Fabric.CliqueID)
		}
	}
	uuid := strings.ToLower(first.Fabric.ClusterUUID)
	return NVLinkDomain{
		Fabric:      true,
		Name:        fmt.Sprintf("%s.%d", uuid, first.Fabric.CliqueID),
		ClusterUUID: uuid,
		CliqueID:    first.Fabric.CliqueID,
	}
}

// Describe says in a phrase where the node stands, for people: its
// domain, why a fabric node is in none, or that it has no fabric.
func (d NVLinkDomain) Describe() string {
	switch {
	case d.InDomain():
		return "NVLink domain " + d.Name
	case d.Fabric:
		return "in a multi-node NVLink fabric, in no NVLink domain: " + d.Message
	default:
		return "no multi-node NVLink fabric"
	}
}
