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

package migrate

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// NVIDIA's names (see the package comment for the sources).
const (
	nvidiaDriverName        = "gpu.nvidia.com"
	computeDomainDriverName = "compute-domain.nvidia.com"
	nvidiaConfigGroup       = "resource.nvidia.com"
	standardDomain          = "resource.kubernetes.io"
)

var configAPIVersion = configapi.SchemeGroupVersion.String()

// gpuClass and migClass are gpudra's classes as the chart names them for
// the driver name (templates/deviceclasses.yaml).
func (m *migrator) gpuClass() string {
	if m.opts.DriverName == gpu.DefaultDriverName {
		return "gpu.gpudra.io"
	}
	return m.opts.DriverName
}

func (m *migrator) migClass() string {
	if m.opts.DriverName == gpu.DefaultDriverName {
		return "mig.gpudra.io"
	}
	return "mig." + m.opts.DriverName
}

// classFor maps NVIDIA's DeviceClasses to gpudra's: the same devices,
// selected the same way (type 'gpu' or 'mig').
func (m *migrator) classFor(name string) (string, bool) {
	switch name {
	case "gpu.nvidia.com":
		return m.gpuClass(), true
	case "mig.nvidia.com":
		return m.migClass(), true
	}
	return "", false
}

// builtinExtendedResources maps the extended resource names of the
// DeviceClasses gpudra's chart installs (for the default driver name) to
// the class names.
var builtinExtendedResources = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	in, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
	if err != nil {
		panic(fmt.Sprintf("the built-in DeviceClasses do not load: %v", err)) // covered by tests
	}
	for _, o := range in.Classes {
		dc := o.Obj.(*resourceapi.DeviceClass)
		if dc.Spec.ExtendedResourceName != nil {
			out[*dc.Spec.ExtendedResourceName] = dc.Name
		}
	}
	return out
})

// nvidiaClassesWithoutEquivalent are NVIDIA's other DeviceClasses.
var nvidiaClassesWithoutEquivalent = map[string]string{
	"vfio.gpu.nvidia.com": "GPUs bound to vfio-pci for passthrough to virtual machines (KubeVirt); gpudra has no equivalent: it gives containers GPUs through the NVIDIA driver, and a GPU bound to vfio-pci is not visible to it",
}

// nvidiaKinds are NVIDIA's custom resources that have no equivalent
// (computedomain.go converts or drops the others).
var nvidiaKinds = map[string]string{
	"ComputeDomain": "a ComputeDomain inside a List: write it on its own, and gpudra migrate turns it into the claim template it names",
}

// renamedAttributes are attribute names of NVIDIA's driver that gpudra
// publishes under another name, fully qualified. pcieBusID was NVIDIA's
// name until it adopted the standard attribute (dcdeb68b).
var renamedAttributes = map[string]string{
	"pcieBusID": standardDomain + "/pciBusID",
}

// attributesWithoutEquivalent says why an attribute or capacity of
// NVIDIA's driver has no counterpart in gpudra.
func attributesWithoutEquivalent(id string) (string, bool) {
	switch {
	case id == "addressingMode":
		return "NVIDIA's driver publishes the GPU's addressing mode (HMM or ATS); gpudra does not", true
	case id == "parentMinor":
		return "no longer published by NVIDIA's driver (ca43bb70) and not by gpudra: select the GPU by parentUUID", true
	case strings.HasPrefix(id, "memorySlice"):
		return "NVIDIA's driver publishes a MIG device's memory slices as capacities; gpudra publishes each placement as a device of its own, named after where it starts on the GPU, and shares the GPU's slices through counters, which the scheduler checks for you", true
	case id == "iommuFDEnabled" || id == "deviceID" || id == "vendorID" || id == "addressableMemory" || id == "numa":
		return "an attribute of NVIDIA's VFIO devices, which gpudra has no equivalent of", true
	}
	return "", false
}

var (
	// quoted names NVIDIA's driver domain in a CEL string literal.
	nvidiaDomainLiteral = regexp.MustCompile(`(['"])gpu\.nvidia\.com(['"])`)
	// oldBusID is the old attribute pcieBusID, as a field or an index.
	oldBusID = regexp.MustCompile(`device\.attributes\[\s*(['"])gpu\.nvidia\.com(['"])\s*\](?:\.pcieBusID\b|\[\s*(['"])pcieBusID(['"])\s*\])`)
	// nvidiaRef is a reference to an attribute or capacity of the domain.
	nvidiaRef = regexp.MustCompile(`device\.(attributes|capacity)\[\s*['"]gpu\.nvidia\.com['"]\s*\](?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['"]([A-Za-z0-9_.-]+)['"]\s*\])`)
	// vfioType compares a type with 'vfio'.
	vfioType = regexp.MustCompile(`['"]vfio['"]`)
	// migType compares a type with 'mig': a selector of MIG devices.
	migType = regexp.MustCompile(`\.type\s*==\s*['"]mig['"]`)
	// migIdentityRef reads a MIG device's uuid or index in NVIDIA's (or,
	// migrated, gpudra's) domain.
	migIdentityRef = regexp.MustCompile(`device\.attributes\[\s*['"][^'"]+['"]\s*\](?:\.(uuid|index)\b|\[\s*['"](uuid|index)['"]\s*\])`)
)

// migIdentity reports what a MIG device's selector reads that gpudra's MIG
// devices do not have: NVIDIA publishes existing MIG devices with their own
// uuid and index; gpudra publishes placements, created on demand, with a
// new UUID each time, so a selector on them would match nothing (and fail
// on every device).
func migIdentity(expr string) []string {
	seen := map[string]bool{}
	var out []string
	for _, sm := range migIdentityRef.FindAllStringSubmatch(expr, -1) {
		id := sm[1] + sm[2]
		if seen[id] {
			continue
		}
		seen[id] = true
		// Only what a partition publishes may be advised: parentIndex and
		// placementStart are in the prepared device's metadata, which no
		// selector reads.
		out = append(out, fmt.Sprintf("attribute %s of a MIG device: gpudra's MIG devices are placements created on demand, with a new UUID each time and no index of their own; select by parentUUID (the GPU's UUID) and profile instead", id))
	}
	return out
}

// rewriteCEL renames NVIDIA's driver and attribute names in an expression.
// It returns the new expression, what it changed, and what has no
// equivalent (left as it is: gpudra check reports it).
func rewriteCEL(expr, driverName string) (out string, changes, missing []string) {
	seen := map[string]bool{}
	for _, sm := range nvidiaRef.FindAllStringSubmatch(expr, -1) {
		id := sm[2] + sm[3]
		if why, ok := attributesWithoutEquivalent(id); ok && !seen[id] {
			seen[id] = true
			missing = append(missing, fmt.Sprintf("%s %s: %s", strings.TrimSuffix(sm[1], "s"), id, why))
		}
	}
	if vfioType.MatchString(expr) {
		missing = append(missing, "devices of type 'vfio' (GPUs bound to vfio-pci for virtual machines): gpudra has no equivalent")
	}
	if strings.Contains(expr, computeDomainDriverName) {
		missing = append(missing, fmt.Sprintf("a selector on the devices of NVIDIA's ComputeDomain driver (multi-node NVLink, IMEX): gpudra's IMEX channels are %s's devices of type 'imex-channel' with the attributes channel and nvlinkDomain (DeviceClasses nvlink-channel and nvlink-shared); rewrite the selector on them", driverName))
	}
	out = oldBusID.ReplaceAllString(expr, "device.attributes[${1}"+standardDomain+"${2}].pciBusID")
	if out != expr {
		changes = append(changes, "gpu.nvidia.com/pcieBusID → "+standardDomain+"/pciBusID")
	}
	next := nvidiaDomainLiteral.ReplaceAllString(out, "${1}"+driverName+"${2}")
	if next != out {
		changes = append(changes, fmt.Sprintf("'%s' → '%s'", nvidiaDriverName, driverName))
	}
	sort.Strings(missing)
	return next, changes, missing
}

// parameters migrates the parameters of an opaque config for NVIDIA's
// driver, and says whether they now are gpudra's (so that the config's
// driver is renamed too); a config without an equivalent is left alone.
func (m *migrator) parameters(p *yaml.Node, field string) bool {
	if p == nil || p.Kind != yaml.MappingNode {
		return false
	}
	av := get(p, "apiVersion")
	k := get(p, "kind")
	group, _, _ := strings.Cut(str(av), "/")
	switch {
	case group == configapi.GroupName:
		return true // already gpudra's
	case group != nvidiaConfigGroup:
		m.note(NoEquivalent, p, field, fmt.Sprintf("parameters of apiVersion %q are not NVIDIA's (%s): left as they are", str(av), nvidiaConfigGroup))
		return false
	}
	var ours string
	switch str(k) {
	case "GpuConfig":
		ours = configapi.GpuConfigKind
	case "MigDeviceConfig":
		ours = configapi.MigConfigKind
	case "VfioDeviceConfig":
		m.note(NoEquivalent, k, field+".kind", "VfioDeviceConfig configures GPUs passed through to virtual machines; gpudra has no equivalent")
		return false
	case "ComputeDomainChannelConfig", "ComputeDomainDaemonConfig":
		m.note(NoEquivalent, k, field+".kind", str(k)+" configures NVIDIA's ComputeDomains (multi-node NVLink, IMEX) under driver "+computeDomainDriverName+", not "+nvidiaDriverName+"; left as it is")
		return false
	default:
		m.note(NoEquivalent, k, field+".kind", fmt.Sprintf("NVIDIA's driver has no config kind %q that gpudra knows of: left as it is", str(k)))
		return false
	}
	m.rename(av, field+".apiVersion", configAPIVersion)
	m.rename(k, field+".kind", ours)
	sharing := get(p, "sharing")
	m.renameKey(sharing, "timeSlicingConfig", "timeSlicing", field+".sharing")
	m.renameKey(sharing, "mpsConfig", "mps", field+".sharing")
	// NVIDIA keys per-device limits by the GPU's index or UUID; gpudra
	// runs MPS on one device per claim and keys its limit "0", the CUDA
	// ordinal its containers see. A map keyed "0" alone means that device
	// in both; any other key has no equivalent.
	if mps := get(sharing, "mps"); mps != nil {
		if kn := key(mps, "defaultPerDevicePinnedMemoryLimit"); kn != nil {
			limits := get(mps, "defaultPerDevicePinnedMemoryLimit")
			if onlyKey(limits, "0") {
				m.renameKey(mps, "defaultPerDevicePinnedMemoryLimit", "perDevicePinnedMemoryLimits", field+".sharing.mps")
			} else {
				m.note(NoEquivalent, kn, field+".sharing.mps.defaultPerDevicePinnedMemoryLimit", "NVIDIA keys these limits by the GPU's index or UUID; gpudra runs MPS on one device per claim, which its containers see as CUDA ordinal \"0\": write perDevicePinnedMemoryLimits: {\"0\": <limit>} (or defaultPinnedDeviceMemoryLimit: <limit>) for the claim's one MPS device, and one claim per shared GPU; left as it is, which gpudra's config API rejects")
			}
		}
	}
	return true
}

// renameKey renames a mapping's key.
func (m *migrator) renameKey(n *yaml.Node, from, to, field string) {
	if kn := key(n, from); kn != nil {
		m.note(Rewritten, kn, joinField(field, from), fmt.Sprintf("%s → %s", from, to))
		m.edits = append(m.edits, edit{node: kn, old: from, new: to})
		kn.Value = to
		m.changed = true
	}
}

// nvidiaDriver says whether a driver name is one of NVIDIA's DRA drivers.
func nvidiaDriver(d string) bool {
	return d == nvidiaDriverName || d == computeDomainDriverName
}

// onlyKey says whether a mapping has exactly one key, k.
func onlyKey(n *yaml.Node, k string) bool {
	return n != nil && n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == k
}
