package plugin

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/pkg/nodestate"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// rememberAttributes keeps the attributes of the devices about to be
// published, for the device metadata of the ones that get prepared.
func (d *Driver) rememberAttributes(resources resourceslice.DriverResources) {
	attrs := map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	for _, pool := range resources.Pools {
		for _, s := range pool.Slices {
			for _, dev := range s.Devices {
				attrs[dev.Name] = dev.Attributes
			}
		}
	}
	d.mu.Lock()
	d.attributes = attrs
	d.mu.Unlock()
}

// deviceMetadata is what the workload can read about a prepared device
// (KEP-5304): every attribute the device is published with (the GPU's
// uuid, productName, nvlinkGroup, resource.kubernetes.io/pciBusID …; a MIG
// partition's profile, parentUUID, placement …) and, for a MIG partition,
// its own MIG-… UUID as uuid, known only once it was created.
func (d *Driver) deviceMetadata(dev nodestate.PreparedDevice) *kubeletplugin.DeviceMetadata {
	d.mu.Lock()
	published := d.attributes[dev.Device]
	d.mu.Unlock()
	md := &kubeletplugin.DeviceMetadata{Attributes: make(map[string]resourceapi.DeviceAttribute, len(published)+1)}
	for name, value := range published {
		md.Attributes[string(name)] = *value.DeepCopy()
	}
	if dev.MigUUID != "" {
		uuid := dev.MigUUID
		md.Attributes[string(slicebuilder.AttrUUID)] = resourceapi.DeviceAttribute{StringValue: &uuid}
	}
	return md
}
