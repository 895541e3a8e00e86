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

import (
	"fmt"
	"strings"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// findingLog owns the report's findings: it gives each its severity and
// line, reports it once however many pods reach it (seen), and remembers
// which objects were reported as not served, so that the inventory does
// not report them twice.
type findingLog struct {
	report *Report
	feats  scheduler.Features
	// builtin are the known DeviceClasses that come from gpudra, shared
	// with the runner: a gpudra class that does not fit the inventory is
	// a note, as its claims are the findings.
	builtin map[string]bool
	seen    map[string]bool // findings already reported
	// unusedClass is set while checking a class that no claim uses, when
	// the inputs have claims (a check of classes alone checks them all).
	unusedClass bool
	// notServedAt are the objects reported as not served, by source.
	notServedAt map[string]bool
}

func newFindingLog(report *Report, feats scheduler.Features, builtin map[string]bool) *findingLog {
	return &findingLog{report: report, feats: feats, builtin: builtin, seen: map[string]bool{}, notServedAt: map[string]bool{}}
}

// inventoryDependent findings say that something does not fit this
// inventory. For a DeviceClass no claim uses (say, a MIG profile of a
// GPU model the inventory lacks) they are notes: the scheduler never
// evaluates that class here.
var inventoryDependent = map[FindingKind]bool{
	FindingUnknownAttribute: true, FindingCapacityAsAttribute: true, FindingAttributeAsCapacity: true,
	FindingUnknownCapacity: true, FindingUnknownDriver: true, FindingRuntimeError: true,
	FindingClassMatchesNothing: true, FindingTypeMismatch: false,
}

// add reports f once. f.Field is relative to the object f.Source
// is of; the finding gets the field's line and its path in the document.
func (fl *findingLog) add(f Finding) {
	if f.Field != "" {
		f.Source = f.Source.At(f.Field)
		f.Field = f.Source.Field(f.Field)
	}
	if f.Severity == "" {
		f.Severity = SeverityError
		switch {
		case fl.unusedClass && inventoryDependent[f.Kind]:
			f.Severity = SeverityNote
			f.Message += " (no claim in the inputs uses this class)"
		case inventoryDependent[f.Kind] && fl.builtin[strings.TrimPrefix(f.Object, "DeviceClass ")] && strings.HasPrefix(f.Object, "DeviceClass "):
			// gpudra's own class does not fit this inventory: the claims
			// that use it say so, as errors; the class is nobody's to fix.
			f.Severity = SeverityNote
			f.Message += " (one of gpudra's own classes: the claims that use it are the findings)"
		}
	}
	// A template used by several pods is checked once per pod; say it once.
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%s\x00%s\x00%s", f.Kind, f.Source.File, f.Source.Document, f.Object, f.Field, f.Message)
	if fl.seen[key] {
		return
	}
	fl.seen[key] = true
	fl.report.Findings = append(fl.report.Findings, f)
}

// addProblem reports what decoding found.
func (fl *findingLog) addProblem(p scheduler.Problem) {
	f := Finding{Source: p.Source, Object: p.Object, Field: p.Field, Message: p.Message, Hint: p.Hint}
	if release, ok := scheduler.OlderWorkloadAPIs[p.GVK.GroupVersion().String()+" "+p.GVK.Kind]; ok {
		fl.olderWorkloadAPI(p, f, release)
		return
	}
	switch p.Kind {
	case scheduler.ProblemUnknownField:
		f.Kind = FindingUnknownField
	case scheduler.ProblemExtendedResource:
		f.Kind = FindingInvalidExtendedResource
	case scheduler.ProblemSkipped:
		f.Kind = FindingSkipped
		if h, ok := vendorKinds[p.GVK.Kind]; ok && f.Hint == "" {
			f.Hint = h
		}
		if p.GVK.Kind != "" {
			fl.customResource(p, f)
			return
		}
	case scheduler.ProblemConverted:
		f.Kind = FindingConverted
		if !fl.feats.Serves(p.GVK.Version, p.GVK.Kind) {
			fl.notServed(p, f)
			return
		}
	default:
		f.Kind = FindingInvalid
	}
	if p.Note {
		f.Severity = SeverityNote
	}
	fl.add(f)
}

// notServed reports an object of a resource.k8s.io version the API
// server of the chosen release does not serve: kubectl apply fails with
// "no matches for kind". It is still read as v1, so that the rest of it
// is checked.
func (fl *findingLog) notServed(p scheduler.Problem, f Finding) {
	f.Kind, f.Severity = FindingNotServed, SeverityError
	fl.notServedAt[p.Source.String()] = true
	gv := p.GVK.GroupVersion().String()
	switch {
	case p.GVK.Kind == "DeviceTaintRule":
		f.Message, f.Hint = taintRuleNotServed(fl.feats.Version, gv)
	case p.GVK.Version == "v1alpha3":
		f.Message = fmt.Sprintf("%s %s is the API of Kubernetes 1.31; Kubernetes %s does not serve it (alpha APIs are off by default): kubectl apply fails with \"no matches for kind\" (read on as resource.k8s.io/v1)", gv, p.GVK.Kind, fl.feats.Version)
		f.Hint = "write apiVersion: resource.k8s.io/v1 (requests keep their fields under exactly:, devices have no basic:); gpudra migrate rewrites it"
	default:
		f.Message = fmt.Sprintf("Kubernetes %s does not serve %s unless an admin enables it (--runtime-config=%s=true; beta APIs are off by default): kubectl apply fails with \"no matches for kind\" (read on as resource.k8s.io/v1)", fl.feats.Version, gv, gv)
		f.Hint = "write apiVersion: resource.k8s.io/v1 (requests keep their fields under exactly:, devices have no basic:); gpudra migrate rewrites it"
	}
	fl.add(f)
}

// taintRuleNotServed says why the release does not serve a
// DeviceTaintRule of the group version gv, and how to taint the device on
// it: the API and the feature gates differ by release (k8s.io/kubernetes
// pkg/features: DeviceTaintRule came in 1.33 as resource.k8s.io/v1alpha3
// behind DRADeviceTaints; 1.35 put it behind its own gate,
// DRADeviceTaintRules; 1.36 made that beta, served as v1beta2 but off,
// with its API; 1.37 made it GA in v1, on). A ResourceSlice's own taints
// are no way out: gpudra's plugin writes its slices, and before 1.36
// the API server drops device taints (DRADeviceTaints is alpha).
func taintRuleNotServed(version, gv string) (msg, hint string) {
	drain := "or, without them, keep pods off the GPU by draining the node (kubectl drain)"
	switch version {
	case "1.34":
		return fmt.Sprintf("Kubernetes 1.34 serves DeviceTaintRules only as resource.k8s.io/v1alpha3 with the DRADeviceTaints feature gate, both off by default; %s is not served: kubectl apply fails with \"no matches for kind\", and the scheduler applies no DeviceTaintRule", gv),
			"enable DRADeviceTaints on the API server, scheduler and controller manager and --runtime-config=resource.k8s.io/v1alpha3=true, and write apiVersion: resource.k8s.io/v1alpha3; " + drain
	case "1.35":
		return fmt.Sprintf("Kubernetes 1.35 serves DeviceTaintRules only as resource.k8s.io/v1alpha3 with the DRADeviceTaints and DRADeviceTaintRules feature gates, all off by default; %s is not served: kubectl apply fails with \"no matches for kind\", and the scheduler applies no DeviceTaintRule", gv),
			"enable DRADeviceTaints and DRADeviceTaintRules on the API server, scheduler and controller manager and --runtime-config=resource.k8s.io/v1alpha3=true, and write apiVersion: resource.k8s.io/v1alpha3; " + drain
	case "1.36":
		return fmt.Sprintf("Kubernetes 1.36 serves DeviceTaintRules only as resource.k8s.io/v1beta2 (or v1alpha3) with the DRADeviceTaintRules feature gate, both off by default (beta); %s is not served: kubectl apply fails with \"no matches for kind\", and the scheduler applies no DeviceTaintRule", gv),
			"enable DRADeviceTaintRules on the API server, scheduler and controller manager and --runtime-config=resource.k8s.io/v1beta2=true, and write apiVersion: resource.k8s.io/v1beta2; " + drain
	}
	return fmt.Sprintf("Kubernetes %s serves DeviceTaintRules as resource.k8s.io/v1; %s is not served by default: kubectl apply fails with \"no matches for kind\" (read on as resource.k8s.io/v1)", version, gv),
		"write apiVersion: resource.k8s.io/v1"
}

// nvidiaGroups are the API groups of NVIDIA's DRA driver's custom
// resources (ComputeDomain, ComputeDomainClique) and of its classic-DRA
// claim parameters (GpuClaimParameters, MigDeviceClaimParameters): no
// CRD for them exists on a gpudra cluster.
var nvidiaGroups = map[string]bool{"resource.nvidia.com": true, "gpu.resource.nvidia.com": true, "nas.gpu.resource.nvidia.com": true}

// nvidiaClassicKinds are the objects of NVIDIA's classic-DRA driver
// (resource.k8s.io/v1alpha2, Kubernetes 1.26–1.30): what each was for,
// and what a gpudra claim writes instead.
var nvidiaClassicKinds = map[string]struct{ meant, instead string }{
	"GpuClaimParameters": {
		meant:   "classic DRA claim parameters (Kubernetes 1.26–1.30), which no claim of a supported release can refer to",
		instead: "write what it asks for in the claim's request: deviceClassName gpu.gpudra.io, count, and CEL selectors on gpudra's attributes (device.capacity['gpu.gpudra.io'].memory, device.attributes['gpu.gpudra.io'].cudaComputeCapability, productName); sharing goes in a GpuConfig (gpudra migrate reports what each holds)",
	},
	"MigDeviceClaimParameters": {
		meant:   "classic DRA claim parameters for a MIG device (Kubernetes 1.26–1.30), which no claim of a supported release can refer to",
		instead: "request deviceClassName mig.gpudra.io with the selectors device.attributes['gpu.gpudra.io'].profile == 'PROFILE' (gpudra creates the partition on demand); sharing goes in a MigConfig (gpudra migrate reports what each holds)",
	},
	"NodeAllocationState": {
		meant:   "the classic-DRA driver's bookkeeping of a node's allocations, which its controller wrote",
		instead: "drop it: gpudra's plugin publishes ResourceSlices and keeps its state on the node",
	},
}

// customResource reports a custom resource: one of NVIDIA's is an error
// (a gpudra cluster has no CRD for it, so applying it fails, and whatever
// waits for it, an IMEX channel's claim template, never comes); any other
// is a warning: check cannot say what it does.
func (fl *findingLog) customResource(p scheduler.Problem, f Finding) {
	if nvidiaGroups[p.GVK.Group] {
		f.Kind, f.Severity = FindingNoCRD, SeverityError
		f.Message = fmt.Sprintf("%s (%s) is a custom resource of NVIDIA's DRA driver: a gpudra cluster has no CRD for it, so kubectl apply fails with \"no matches for kind\"", p.GVK.Kind, p.GVK.GroupVersion())
		if what, ok := nvidiaClassicKinds[p.GVK.Kind]; ok {
			f.Message += ": " + what.meant
			f.Hint = what.instead
		} else if p.GVK.Kind == "ComputeDomain" {
			f.Message += ", and what its controller would make (the IMEX channel's ResourceClaimTemplate) never exists"
			f.Hint = vendorKinds[p.GVK.Kind]
		} else if h, ok := vendorKinds[p.GVK.Kind]; ok {
			f.Hint = h
		}
		if f.Hint == "" {
			f.Hint = "gpudra has no equivalent: drop it, and rewrite the claims that used it for gpudra's classes (gpudra migrate reports each)"
		}
		fl.add(f)
		return
	}
	if what, ok := queueingGroups[p.GVK.Group]; ok {
		f.Severity = SeverityNote
		f.Message = fmt.Sprintf("%s (%s) is %s: check does not model its quotas or admission, and places the pods that name a queue as if it admitted them", p.GVK.Kind, p.GVK.GroupVersion(), what)
		fl.add(f)
		return
	}
	f.Severity = SeverityWarning
	f.Message = fmt.Sprintf("%s (%s) is a custom resource: not checked; if its controller makes pods or claims that use DRA devices, check their specs too", p.GVK.Kind, p.GVK.GroupVersion())
	fl.add(f)
}

// queueingGroups are the API groups of job queueing systems, whose
// objects hold quotas and queues, not pods or claims: a note says what
// check leaves to them.
var queueingGroups = map[string]string{
	"kueue.x-k8s.io": "Kueue's queueing configuration",
}

// olderWorkloadAPI reports an object of a Workload API version that only
// an older release serves (scheduler.OlderWorkloadAPIs): on that release
// it is what the cluster takes, though check does not read it (a warning:
// not all was checked); on any other the API server rejects it.
func (fl *findingLog) olderWorkloadAPI(p scheduler.Problem, f Finding, release string) {
	gv := p.GVK.GroupVersion().String()
	if fl.feats.Version == release {
		f.Kind, f.Severity = FindingSkipped, SeverityWarning
		f.Message = fmt.Sprintf("%s %s is the Workload API of Kubernetes %s (alpha), which check does not read: its pods are checked one by one, not as a gang", gv, p.GVK.Kind, release)
		f.Hint = workloadAPIAt(release) + "; check the gang as scheduling.k8s.io/v1beta1 with --kubernetes-version 1.37"
		fl.add(f)
		return
	}
	f.Kind, f.Severity = FindingNotServed, SeverityError
	f.Message = fmt.Sprintf("Kubernetes %s does not serve %s %s, the Workload API of Kubernetes %s only: kubectl apply fails with \"no matches for kind\", and its pods are scheduled one by one", fl.feats.Version, gv, p.GVK.Kind, release)
	f.Hint = workloadAPIAt(fl.feats.Version)
	fl.add(f)
}
