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

// Package clusterstatus puts a cluster's ResourceSlices and ResourceClaims
// together into what `gpudra status` shows: per node every GPU of one
// driver, its MIG partitions and shares, its health and taints, the claim,
// namespace and pods holding each, the device UUIDs the kubelet plugin
// reported in the claims' status.devices, and what is free (whole GPUs,
// MIG placements, memory of shared GPUs).
//
// It reads plain API objects (internal/clusterread fetches them, tests write
// them). A whole GPU is free when no claim holds it (or any partition of
// it) and no NoSchedule taint keeps claims away. The room for MIG
// partitions is counted per profile, one profile at a time: how many more
// partitions of that profile the published placements and what is left
// of the GPU's counters (memory slices, multiprocessors, engines,
// per-profile limits) allow, as the scheduler would give them out.
package clusterstatus

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Report is the whole view.
type Report struct {
	Driver string `json:"driver"`
	// Namespace, when set, limits the claims and pods shown to one
	// namespace (devices held elsewhere show as held, without names).
	Namespace string `json:"namespace,omitempty"`
	Nodes     []Node `json:"nodes"`
	// Domains are the NVLink domains whose IMEX channel pools
	// gpudra-controller publishes, with the channels claims hold.
	Domains []Domain `json:"nvlinkDomains,omitempty"`
	// Notes say what the view could not know.
	Notes []string `json:"notes,omitempty"`
}

// Domain is one NVLink domain's channel pool.
type Domain struct {
	Name string `json:"name"`
	// Nodes are the nodes whose GPUs publish the domain.
	Nodes []string `json:"nodes"`
	// Channels is how many channels the pool publishes (channel-0, the
	// shared one, included).
	Channels int `json:"channels"`
	// Held are the channels claims hold, by channel.
	Held []HeldChannel `json:"held,omitempty"`
	// IMEXNotReady are the nodes whose plugin says their IMEX daemon is
	// not ready (imexReady false): new pods holding a channel stay off
	// them.
	IMEXNotReady []string `json:"imexNotReady,omitempty"`
}

// HeldChannel is a channel and a claim that holds it (channel-0 may be
// held by several).
type HeldChannel struct {
	Channel string `json:"channel"`
	Holder
}

// Node is one node's pool.
type Node struct {
	Name string `json:"name"`
	GPUs []GPU  `json:"gpus"`
	Free Free   `json:"free"`
	// NVLinkDomain is the multi-node NVLink domain its GPUs publish
	// (nvlinkDomain); empty for a node in none.
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// IMEXDaemon is what its GPUs say of the node's IMEX daemon
	// (imexReady): "ready", "not ready", or empty where the plugin does
	// not ask.
	IMEXDaemon string `json:"imexDaemon,omitempty"`
}

// IMEX daemon states of Node.IMEXDaemon.
const (
	IMEXReady    = "ready"
	IMEXNotReady = "not ready"
)

// Free is what a node can give right now.
type Free struct {
	// GPUs is the number of whole GPUs free (untainted, nothing held).
	GPUs int `json:"gpus"`
	// Partitions is how many more MIG partitions of each profile the
	// node's GPUs could take, one profile at a time (a GPU that takes a
	// 7g.80gb takes no 1g.10gb besides).
	Partitions map[string]int `json:"partitions,omitempty"`
	// SharedMemory is the memory left on GPUs shared by claims that each
	// hold a share (consumable capacity).
	SharedMemory *resource.Quantity `json:"sharedMemory,omitempty"`
}

// GPU states.
const (
	StateFree        = "free"
	StateWhole       = "whole"       // one claim holds the GPU
	StateShared      = "shared"      // claims hold shares of it
	StatePartitioned = "partitioned" // claims hold MIG partitions of it
	StateUnpublished = "unpublished" // neither the GPU nor a partition is offered (e.g. an admin's MIG instances)
)

// GPU is one physical GPU.
type GPU struct {
	Device       string `json:"device"` // gpu-<minor>
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// IMEXReady is the GPU's imexReady attribute, nil without it.
	IMEXReady *bool              `json:"-"`
	Minor     int                `json:"minor"`
	UUID      string             `json:"uuid,omitempty"`
	Model     string             `json:"model,omitempty"`
	PCIBusID  string             `json:"pciBusID,omitempty"`
	Memory    *resource.Quantity `json:"memory,omitempty"`
	Healthy   bool               `json:"healthy"`
	Taints    []string           `json:"taints,omitempty"` // key=value:effect
	State     string             `json:"state"`
	// Available says a claim for a whole GPU could get it now: published,
	// nothing held, no NoSchedule taint.
	Available  bool               `json:"available"`
	Shareable  bool               `json:"shareable,omitempty"`
	FreeMemory *resource.Quantity `json:"freeMemory,omitempty"` // shareable GPUs
	Holders    []Holder           `json:"holders,omitempty"`    // the whole GPU or its shares
	Partitions []Partition        `json:"partitions,omitempty"` // allocated MIG partitions
	Monitors   []Holder           `json:"monitors,omitempty"`   // admin-access (monitoring) claims
	// Room is how many more MIG partitions of each profile the GPU could
	// take, one profile at a time.
	Room map[string]int `json:"room,omitempty"`
}

// Partition is an allocated MIG partition.
type Partition struct {
	Device         string `json:"device"`
	Profile        string `json:"profile"`
	PlacementStart int    `json:"placementStart"`
	PlacementSize  int    `json:"placementSize"`
	Holder         Holder `json:"holder"`
}

// Holder is a claim holding a device (or a share of one).
type Holder struct {
	Namespace string `json:"namespace,omitempty"`
	Claim     string `json:"claim,omitempty"`
	// Hidden is set for a claim outside Report.Namespace.
	Hidden  bool     `json:"hidden,omitempty"`
	Request string   `json:"request,omitempty"`
	Pods    []string `json:"pods,omitempty"`
	ShareID string   `json:"shareID,omitempty"`
	// Memory is the share's memory (consumable capacity).
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Prepared is set once the plugin reported the device in the claim's
	// status.devices with Ready true; Status is what it reported.
	Prepared bool                    `json:"prepared"`
	Status   *configapi.DeviceStatus `json:"status,omitempty"`
}

// Name is "namespace/claim".
func (h Holder) Name() string {
	if h.Hidden {
		return "(another namespace)"
	}
	return h.Namespace + "/" + h.Claim
}

// Options select what the report shows.
type Options struct {
	Driver string
	// Namespace shows only this namespace's claims by name.
	Namespace string
	// Nodes, when set, limits the report to these nodes.
	Nodes []string
}

// Summary is one line per node of what is free, e.g. "6 whole GPUs; or
// MIG partitions of one profile: 1g.10gb 42, 7g.80gb 6; 40Gi on shared
// GPUs".
func (f Free) Summary() string {
	parts := []string{plural(f.GPUs, "whole GPU")}
	if len(f.Partitions) > 0 {
		profiles := make([]string, 0, len(f.Partitions))
		for p := range f.Partitions {
			profiles = append(profiles, p)
		}
		slices.SortFunc(profiles, compareProfiles)
		var ps []string
		for _, p := range profiles {
			ps = append(ps, p+" "+strconv.Itoa(f.Partitions[p]))
		}
		parts = append(parts, "or MIG partitions of one profile: "+strings.Join(ps, ", "))
	}
	if f.SharedMemory != nil {
		parts = append(parts, f.SharedMemory.String()+" on shared GPUs")
	}
	return strings.Join(parts, "; ")
}

// compareProfiles orders MIG profile names by compute slices, then memory,
// then name: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, …, 7g.80gb.
func compareProfiles(a, b string) int {
	num := func(s, unit string) int {
		i := strings.Index(s, unit)
		if i <= 0 {
			return 0
		}
		j := i
		for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
			j--
		}
		n, _ := strconv.Atoi(s[j:i])
		return n
	}
	return cmp.Or(cmp.Compare(num(a, "g."), num(b, "g.")), cmp.Compare(num(a, "gb"), num(b, "gb")), cmp.Compare(a, b))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
