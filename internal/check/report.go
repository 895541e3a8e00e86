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

package check

import "github.com/gpudra/gpudra/internal/scheduler"

// FindingKind classifies a finding; the JSON output carries it as is.
type FindingKind string

// The kinds of findings.
const (
	FindingCompile             FindingKind = "compile-error"
	FindingCostLimit           FindingKind = "cost-limit"
	FindingTooLong             FindingKind = "too-long"
	FindingUnknownAttribute    FindingKind = "unknown-attribute"
	FindingCapacityAsAttribute FindingKind = "capacity-as-attribute"
	FindingAttributeAsCapacity FindingKind = "attribute-as-capacity"
	FindingUnknownCapacity     FindingKind = "unknown-capacity"
	FindingUnknownDriver       FindingKind = "unknown-driver"
	FindingTypeMismatch        FindingKind = "type-mismatch"
	FindingRuntimeError        FindingKind = "runtime-error"
	FindingClassMatchesNothing FindingKind = "class-matches-nothing"
	FindingUnknownClass        FindingKind = "unknown-class"
	FindingUnsatisfiable       FindingKind = "unsatisfiable"
	FindingMissingClaim        FindingKind = "missing-claim"
	FindingInvalid             FindingKind = "invalid"
	FindingUnknownField        FindingKind = "unknown-field"
	FindingEmptyInventory      FindingKind = "empty-inventory"
	// FindingShadowsBuiltin: an input DeviceClass has the name of one of
	// gpudra's own (which the Helm chart installs) but differs from it.
	FindingShadowsBuiltin FindingKind = "shadows-builtin"
	// FindingInvalidConfig: an opaque config for gpudra's driver that the
	// kubelet plugin rejects at prepare.
	FindingInvalidConfig FindingKind = "invalid-config"
	// FindingPrepareRefused: an allocation the kubelet plugin refuses to
	// prepare (Finding.Refusal says why, a internal/claimplan kind): MPS on
	// two devices, claims sharing a GPU alike, a limit keyed by no device.
	FindingPrepareRefused FindingKind = "prepare-refused"
	// FindingForeignConfig (a note): another vendor's opaque config.
	FindingForeignConfig FindingKind = "foreign-config"
	// FindingExtendedResource: a pod's extended resource that nothing
	// offers on this inventory.
	FindingExtendedResource FindingKind = "extended-resource"
	// FindingInvalidExtendedResource: an extended resource (nvidia.com/gpu)
	// the API server rejects in a pod spec: requested without a limit,
	// with a request other than its limit, or as a fraction.
	FindingInvalidExtendedResource FindingKind = "invalid-extended-resource"
	// FindingUnknownRequest (a warning): a container names a request
	// (resources.claims[].request) its claim does not have; the kubelet
	// gives it no device of that claim.
	FindingUnknownRequest FindingKind = "unknown-request"
	// FindingNodeNameClaim: a pod bound by spec.nodeName that has claims
	// or DRA-backed extended resources, which only the scheduler
	// allocates (nodename.go): an error where the pod never starts, a
	// warning where it may, or runs without the device.
	FindingNodeNameClaim FindingKind = "node-name-claim"
	// FindingTooManyClaimUsers: more pods share a ResourceClaim than its
	// status.reservedFor can hold (256): the pods past it never bind.
	FindingTooManyClaimUsers FindingKind = "too-many-claim-users"
	// FindingQuotaExceeded: a claim that would take its namespace past a
	// ResourceQuota on DeviceClass devices (or ResourceClaims) among the
	// inputs: the API server refuses to create it (quota.go).
	FindingQuotaExceeded FindingKind = "quota-exceeded"
	// FindingInvalidVersion: a semver() literal that is not a semantic
	// version; the selector fails at run time on every device.
	FindingInvalidVersion FindingKind = "invalid-version"
	// FindingMissingDomain: device.attributes['name'] or
	// device.capacity['name'] without the domain.
	FindingMissingDomain FindingKind = "missing-domain"
	// FindingSkipped (a warning): a custom resource check does not read.
	FindingSkipped FindingKind = "skipped"
	// FindingConverted (a note): a resource.k8s.io v1beta1/v1beta2 object
	// read as v1 on a cluster that serves it (see FindingNotServed).
	FindingConverted FindingKind = "converted"
	// FindingNotApplied (a note): an object the cluster of the chosen
	// Kubernetes version takes only with features off by default.
	FindingNotApplied FindingKind = "not-applied"
	// FindingNotServed: an object of an API version (or kind) the API
	// server of the chosen Kubernetes version does not serve by default.
	FindingNotServed FindingKind = "not-served"
	// FindingNoCRD: a custom resource of NVIDIA's driver, for which a
	// gpudra cluster has no CRD.
	FindingNoCRD FindingKind = "no-crd"
	// FindingChannelWithoutGang (a warning): a standalone claim for an
	// IMEX channel that several pods share outside a gang; the first
	// pod's binding fixes the NVLink domain for all of them.
	FindingChannelWithoutGang FindingKind = "channel-without-gang"
	// FindingSharedClaimFirst: a gang's pod that lists a claim its group
	// shares before a claim of its own; kube-scheduler 1.37 then gives
	// the later pods of the gang each other's allocations (gangs.go).
	FindingSharedClaimFirst FindingKind = "shared-claim-first"
	// FindingGangWithoutDomainTopology (a warning): a gang with an IMEX
	// channel claim whose PodGroup does not name the NVLink domain label
	// as its topology; kube-scheduler then places it pod by pod, and its
	// first pod may fence it into a domain without room (nvlink.go).
	FindingGangWithoutDomainTopology FindingKind = "gang-without-domain-topology"
	// FindingWaitsForSpare: a claim that no node's published MIG
	// placements take now, but a node's next spare would (republish.go):
	// a warning for a pod that gpudra-controller gives a spare in fleet
	// mode, an error for a gang, which binds before any prepare refills.
	FindingWaitsForSpare FindingKind = "waits-for-spare"
)

// Finding is one problem, located as precisely as the input allows.
type Finding struct {
	Kind FindingKind `json:"kind"`
	// Severity is "error" (the cluster or the plugin refuses it, or a pod
	// stays Pending or never starts: exit status 1), "warning" (works, but
	// probably not what was meant, or not all of it was checked: exit
	// status 1 with --strict) or "note" (worth knowing, e.g. a class no
	// claim uses matches nothing here).
	Severity   string           `json:"severity"`
	Source     scheduler.Source `json:"source"`
	Object     string           `json:"object,omitempty"`     // "DeviceClass gpu.gpudra.io"
	Field      string           `json:"field,omitempty"`      // "spec.selectors[0].cel.expression"
	Expression string           `json:"expression,omitempty"` // the CEL expression
	Caret      string           `json:"caret,omitempty"`      // the expression's line and a caret under the position
	Message    string           `json:"message"`
	Hint       string           `json:"hint,omitempty"`
	Devices    []string         `json:"devices,omitempty"` // devices that raised it (node/device), a few
	// Refusal is the kind of refusal (internal/claimplan) of the plugin's
	// prepare that the finding predicts, when it predicts one.
	Refusal string `json:"refusal,omitempty"`
}

// Report is what gpudra check found.
type Report struct {
	KubernetesVersion string         `json:"kubernetesVersion"`
	Sequential        bool           `json:"sequential"`
	Inventory         InventoryInfo  `json:"inventory"`
	Selectors         []SelectorInfo `json:"selectors"`
	Classes           []ClassInfo    `json:"classes"`
	Claims            []ClaimInfo    `json:"claims"`
	Pods              []PodInfo      `json:"pods,omitempty"`
	Findings          []Finding      `json:"findings"`
	Ignored           []string       `json:"ignored,omitempty"`
	// Strict: warnings count for the exit status (--strict).
	Strict   bool  `json:"strict,omitempty"`
	Stats    Stats `json:"stats"`
	ExitCode int   `json:"exitCode"`
}

// InventoryInfo describes the devices the selectors ran against.
type InventoryInfo struct {
	Source string `json:"source"` // "profile dgx-h100 (gpudra's slice builder)" or "ResourceSlices from files"
	// Notes say how the inventory follows the Kubernetes version: what
	// the plugin publishes on it and what its API server drops.
	Notes []string `json:"notes,omitempty"`
	// Spares says what check assumes about MIG spares (docs/mig.md):
	// which nodes publish a free GPU's placements, whether a prepare
	// refills them, and what gpudra-controller gives in fleet mode.
	Spares  string   `json:"spares"`
	Drivers []string `json:"drivers"`
	Nodes   int      `json:"nodes"`
	Slices  int      `json:"slices"`
	Devices int      `json:"devices"`
}

// SelectorInfo is one CEL expression: where it is, what the compiler said,
// and how many devices it matches.
type SelectorInfo struct {
	Source     scheduler.Source `json:"source"`
	Object     string           `json:"object"`
	Field      string           `json:"field"`
	Expression string           `json:"expression"`
	Type       string           `json:"type,omitempty"`   // the output type (bool)
	Cost       uint64           `json:"cost,omitempty"`   // estimated worst-case cost
	Error      string           `json:"error,omitempty"`  // compile error
	Matches    int              `json:"matches"`          // devices it matches
	Errors     int              `json:"errors,omitempty"` // devices it failed on
	Devices    int              `json:"evaluated"`        // devices it ran on
}

// Matches is a set of matching devices.
type Matches struct {
	Count int `json:"count"`
	Nodes int `json:"nodes"` // nodes with at least one
	// Devices lists them as node/device when the inventory is small
	// (see Options.ListLimit).
	Devices []string `json:"devices,omitempty"`
}

// ClassInfo is a DeviceClass and the devices it matches.
type ClassInfo struct {
	Name    string           `json:"name"`
	Source  scheduler.Source `json:"source"`
	Matches Matches          `json:"matches"`
}

// RequestInfo is one request (or firstAvailable subrequest) of a claim.
type RequestInfo struct {
	Name    string        `json:"name"` // "gpu" or "gpu/h100"
	Class   string        `json:"deviceClassName"`
	Mode    string        `json:"allocationMode,omitempty"`
	Count   int64         `json:"count,omitempty"`
	Matches Matches       `json:"matches"`
	Sub     []RequestInfo `json:"firstAvailable,omitempty"`
}

// ClaimInfo is one claim (from a ResourceClaim, a template, or a pod's
// template reference) and what the allocator made of it.
type ClaimInfo struct {
	Name     string           `json:"name"`          // namespace/name
	From     string           `json:"from"`          // "ResourceClaim", "ResourceClaimTemplate x", "Pod p"
	Pod      string           `json:"pod,omitempty"` // the pod it was allocated with
	Source   scheduler.Source `json:"source"`
	Requests []RequestInfo    `json:"requests"`
	// Allocation is set when the allocator found devices.
	Allocation *Allocation `json:"allocation,omitempty"`
	// Unsatisfiable says why not, one line per reason.
	Unsatisfiable []string `json:"unsatisfiable,omitempty"`
	// PrepareFails says why gpudra's kubelet plugin would refuse to
	// prepare the allocation (the pod stays in ContainerCreating).
	PrepareFails string `json:"prepareFails,omitempty"`
}

// PodInfo is a pod: where its claims were allocated and the devices each
// container would receive (through resources.claims).
type PodInfo struct {
	Name   string           `json:"name"`
	Source scheduler.Source `json:"source"`
	// Owner is the workload the pod comes from ("Deployment default/x").
	Owner string `json:"owner,omitempty"`
	// NoDRA: the pod asks for no DRA device (no claims, no extended
	// resource a DeviceClass maps).
	NoDRA bool `json:"noDRA,omitempty"`
	// Blocked says why the pod stays Pending whatever its claims get.
	Blocked []string `json:"blocked,omitempty"`
	Node    string   `json:"node,omitempty"`
	Pending bool     `json:"pending,omitempty"` // a claim is not allocatable: the pod stays Pending
	// PrepareFails says, for each claim gpudra's kubelet plugin would not
	// prepare, why: the pod is scheduled but stays in ContainerCreating.
	PrepareFails []string        `json:"prepareFails,omitempty"`
	Containers   []ContainerInfo `json:"containers"`
}

// ContainerInfo lists the devices one container would receive.
type ContainerInfo struct {
	Name    string   `json:"name"`
	Devices []string `json:"devices"`
}

// Allocation is the allocator's result for a claim.
type Allocation struct {
	Node    string            `json:"node"`
	Devices []AllocatedDevice `json:"devices"`
}

// AllocatedDevice is one result of an allocation.
type AllocatedDevice struct {
	Request string `json:"request"` // "gpu", or "gpu/h100" when a firstAvailable subrequest was taken
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
}

// Stats are the work done, for the benchmark and -v.
type Stats struct {
	Expressions  int `json:"expressions"`
	Compiled     int `json:"compiled"`     // compiled (cache misses)
	Evaluations  int `json:"evaluations"`  // CEL evaluations actually run
	CachedEvals  int `json:"cachedEvals"`  // device × selector pairs answered from a device with the same relevant values
	AllocateRuns int `json:"allocateRuns"` // allocator calls (one per unit and node tried)
}

// ExitCode is gpudra check's exit status for what Run returned: 2 for an
// error (unusable input), 1 for a report with errors (or, when the report
// is strict, warnings), 0 otherwise.
func ExitCode(rep *Report, err error) int {
	switch {
	case err != nil || rep == nil:
		return 2
	case rep.Errors() > 0, rep.Strict && rep.Warnings() > 0:
		return 1
	}
	return 0
}

// AddFindings adds findings made outside Run (a dry run on a real API
// server) and sets the exit code anew.
func (rep *Report) AddFindings(fs ...Finding) {
	rep.Findings = append(rep.Findings, fs...)
	rep.ExitCode = ExitCode(rep, nil)
}

// Severities of findings.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityNote    = "note"
)

// Errors counts the findings of severity error.
func (rep *Report) Errors() int { return rep.count(SeverityError) }

// Warnings counts the findings of severity warning.
func (rep *Report) Warnings() int { return rep.count(SeverityWarning) }

// Notes counts the findings of severity note.
func (rep *Report) Notes() int { return rep.count(SeverityNote) }

func (rep *Report) count(severity string) int {
	n := 0
	for _, f := range rep.Findings {
		if f.Severity == severity {
			n++
		}
	}
	return n
}
