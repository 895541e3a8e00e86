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

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// vendorAPI is another DRA driver's opaque config API that manifests
// written for that driver carry, and what gpudra offers instead.
type vendorAPI struct {
	group  string // API group of its config kinds
	who    string
	driver string // its default driver name
	// kinds maps its config kinds to gpudra's equivalent ("" for none).
	kinds map[string]string
	// advice says what to do instead of a kind gpudra needs no
	// equivalent of (its kinds entry is "").
	advice map[string]string
}

// Facts from the drivers' own APIs: NVIDIA's dra-driver-nvidia-gpu
// (resource.nvidia.com/v1beta1: GpuConfig, MigDeviceConfig,
// VfioDeviceConfig, ComputeDomainChannelConfig, ComputeDomainDaemonConfig)
// and kubernetes-sigs/dra-example-driver (gpu.resource.example.com/v1alpha1
// GpuConfig).
var vendorAPIs = []vendorAPI{
	{group: "resource.nvidia.com", who: "NVIDIA's DRA driver (dra-driver-nvidia-gpu)", driver: "gpu.nvidia.com", kinds: map[string]string{
		"GpuConfig":                  configapi.GpuConfigKind,
		"MigDeviceConfig":            configapi.MigConfigKind,
		"VfioDeviceConfig":           "",
		"ComputeDomainChannelConfig": "",
		"ComputeDomainDaemonConfig":  "",
	}, advice: map[string]string{
		"ComputeDomainChannelConfig": "gpudra's IMEX channels need no config (the scheduler picks the NVLink domain and the channel): drop it, and ask for DeviceClass nvlink-channel.gpudra.io (gpudra migrate does both)",
		"ComputeDomainDaemonConfig":  "gpudra runs the IMEX daemons itself, one on every node of an NVLink domain, before any job: drop the claim that carries it (gpudra migrate does)",
	}},
	{group: "gpu.resource.example.com", who: "the DRA example driver (dra-example-driver)", driver: "gpu.example.com", kinds: map[string]string{
		"GpuConfig": configapi.GpuConfigKind,
	}},
}

// vendorKinds are other drivers' custom resources that manifests written
// for them carry, and what they mean for gpudra.
var vendorKinds = map[string]string{
	"ComputeDomain":       "gpudra's equivalent is a claim for one IMEX channel of an NVLink domain (DeviceClass nvlink-channel.gpudra.io, or nvlink-shared.gpudra.io for the shared channel 0): gpudra migrate turns the ComputeDomain into the claim template it names, and gpudra runs the IMEX daemons itself",
	"ComputeDomainClique": "the record of a clique that NVIDIA's IMEX daemons write: gpudra's nodes carry their NVLink domain as the label gpu.gpudra.io/nvlink-domain instead; drop it",
}

// vendorOf returns the vendor API an apiVersion belongs to.
func vendorOf(apiVersion string) (vendorAPI, bool) {
	group, _, _ := strings.Cut(apiVersion, "/")
	for _, v := range vendorAPIs {
		if v.group == group {
			return v, true
		}
	}
	return vendorAPI{}, false
}

// equivalent says what gpudra offers for another vendor's config kind,
// under gpudra's driver name.
func (v vendorAPI) equivalent(kind, driverName string) string {
	ours, known := v.kinds[kind]
	switch {
	case !known:
		return fmt.Sprintf("gpudra's configs are apiVersion %s, kinds %s and %s, under driver %s", configapi.SchemeGroupVersion, configapi.GpuConfigKind, configapi.MigConfigKind, driverName)
	case ours == "" && v.advice[kind] != "":
		return v.advice[kind]
	case ours == "":
		return fmt.Sprintf("gpudra has no equivalent of %s", kind)
	}
	return fmt.Sprintf("gpudra's equivalent is apiVersion %s, kind %s, under driver %s (its fields differ: see the Device configuration section of gpudra's docs/attributes.md)", configapi.SchemeGroupVersion, ours, driverName)
}

// vendorClasses are other drivers' DeviceClasses that manifests written
// for them name, and gpudra's class for the same devices (for the default
// driver name).
var vendorClasses = map[string]string{
	"gpu.nvidia.com":  "gpu.gpudra.io",
	"mig.nvidia.com":  "mig.gpudra.io",
	"gpu.example.com": "gpu.gpudra.io",
	// NVIDIA's IMEX channels: of a ComputeDomain, and of the channel
	// pools its driver published before ComputeDomains.
	"compute-domain-default-channel.nvidia.com": "nvlink-channel.gpudra.io",
	"imex.nvidia.com": "nvlink-channel.gpudra.io",
}

// renamedAttributes are attribute names of other drivers (or of their
// older releases) that gpudra publishes under another name: what to write
// instead. NVIDIA's driver called the PCI address pcieBusID until it
// adopted the standard attribute.
var renamedAttributes = map[string]string{
	"pcieBusID": "the PCI address is the standard attribute device.attributes['resource.kubernetes.io'].pciBusID (NVIDIA's driver once called it pcieBusID)",
	"busID":     "the PCI address is the standard attribute device.attributes['resource.kubernetes.io'].pciBusID",
	"memory":    "memory is a capacity: device.capacity['<driver>'].memory.compareTo(quantity('40Gi')) >= 0",
}

// vendorClassesWithoutEquivalent are NVIDIA's DeviceClasses that gpudra
// has nothing like (deployments/helm/dra-driver-nvidia-gpu/templates of
// NVIDIA's driver), and why.
var vendorClassesWithoutEquivalent = map[string]string{
	"vfio.gpu.nvidia.com":              "NVIDIA's class for GPUs bound to vfio-pci for virtual machines (KubeVirt): gpudra has no equivalent; it gives containers GPUs through the NVIDIA driver, and a GPU bound to vfio-pci is not visible to it",
	"compute-domain-daemon.nvidia.com": "NVIDIA's class for the IMEX daemon of a ComputeDomain (multi-node NVLink): gpudra needs no claim for it, as it runs one IMEX daemon on every node of an NVLink domain before any job; drop the claim",
}
