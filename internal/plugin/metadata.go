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

package plugin

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// rememberAttributes keeps the attributes of the devices about to be
// published, for the device metadata of the ones that get prepared. It
// keeps those of devices published earlier too: a partition allocated
// while its GPU published its placements may be prepared after they were
// hidden. A device's attributes never change while the plugin runs.
func (p *publisher) rememberAttributes(resources resourceslice.DriverResources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attributes == nil {
		p.attributes = map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	}
	for _, pool := range resources.Pools {
		for _, s := range pool.Slices {
			for _, dev := range s.Devices {
				p.attributes[dev.Name] = dev.Attributes
			}
		}
	}
}

// deviceMetadata is what the workload can read about a prepared device
// (KEP-5304): every attribute the device is published with (the GPU's
// uuid, productName, nvlinkGroup, resource.kubernetes.io/pciBusID …; a MIG
// partition's profile, parentUUID …) and, for a MIG partition, what the
// slices leave out to stay small but a workload may want: its GPU's
// attributes (driver versions, NVLink island, PCI and NUMA placement),
// parentIndex, placementStart and placementSize, and its own MIG-… UUID
// as uuid, known only once it was created.
func (p *publisher) deviceMetadata(dev nodestate.PreparedDevice) *kubeletplugin.DeviceMetadata {
	p.mu.Lock()
	published := p.attributes[dev.Device]
	var parent map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	mig, isMIG := p.node.MigDeviceByName(dev.Device)
	if isMIG {
		parent = p.attributes[mig.Parent.DeviceName()]
	}
	p.mu.Unlock()
	md := &kubeletplugin.DeviceMetadata{Attributes: make(map[string]resourceapi.DeviceAttribute, len(published)+len(parent)+4)}
	for name, value := range parent {
		switch name {
		case slicebuilder.AttrType, slicebuilder.AttrUUID, slicebuilder.AttrMinor:
		case slicebuilder.AttrIndex:
			md.Attributes["parentIndex"] = *value.DeepCopy()
		default:
			md.Attributes[string(name)] = *value.DeepCopy()
		}
	}
	for name, value := range published {
		md.Attributes[string(name)] = *value.DeepCopy()
	}
	if isMIG {
		start, size := int64(mig.Placement.Start), int64(mig.Placement.Size)
		md.Attributes["placementStart"] = resourceapi.DeviceAttribute{IntValue: &start}
		md.Attributes["placementSize"] = resourceapi.DeviceAttribute{IntValue: &size}
	}
	if dev.MigUUID != "" {
		uuid := dev.MigUUID
		md.Attributes[string(slicebuilder.AttrUUID)] = resourceapi.DeviceAttribute{StringValue: &uuid}
	}
	return md
}
