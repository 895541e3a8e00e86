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

package gpudratest

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Multi-node NVLink inventories for the offline tools' tests, made by hand
// from the shapes docs/nvlink.md describes (the research behind it:
// nvlink-domains.md §4.2–4.3): each node of a domain carries the domain
// as a label and as the nvlinkDomain attribute of its GPUs, and the
// domain has one pool of IMEX channels, published for all its nodes
// (a pool-level node selector on the label): channel-0, shared
// (allowMultipleAllocations), and channel-1…N, exclusive.
//
// They stand in for what the fake profiles and gpudra-controller publish
// once fabric discovery and the channel pools exist; a test that takes
// its GPU slices from internal/fakenodes gives them domains here.

// Example NVLink domains ("<cluster UUID>.<clique ID>"; 32766 is the
// clique of a rack's default partition, nvlink-domains.md §3.1).
const (
	DomainA = "9f410827-489f-46fd-8203-51266ca08eb7.32766"
	DomainB = "5c0e1d2a-7b3f-4e8a-9d61-2f4b8c7a1e90.32766"
)

// InNVLinkDomains gives nodes NVLink domains: every GPU of a slice of a
// node in domainOf gets the nvlinkDomain attribute, and the node (as a
// Node object, labelled with its hostname and its domain) is returned;
// every domain gets a channel pool of channels+1 devices. The slices are
// copied, not changed. Nodes not in domainOf keep their slices and get a
// Node object without a domain.
func InNVLinkDomains(driverName string, channels int, slices []*resourceapi.ResourceSlice, domainOf map[string]string) ([]*resourceapi.ResourceSlice, []*v1.Node) {
	var out []*resourceapi.ResourceSlice
	seenNode := map[string]bool{}
	var nodes []*v1.Node
	var domains []string
	seenDomain := map[string]bool{}
	for _, s := range slices {
		s = s.DeepCopy()
		node := ptr.Deref(s.Spec.NodeName, "")
		domain := domainOf[node]
		if domain != "" && s.Spec.Driver == driverName {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if d.Attributes[slicebuilder.AttrType].StringValue == nil || *d.Attributes[slicebuilder.AttrType].StringValue != slicebuilder.TypeGPU {
					continue
				}
				d.Attributes[slicebuilder.AttrNVLinkDomain] = resourceapi.DeviceAttribute{StringValue: ptr.To(domain)}
			}
		}
		out = append(out, s)
		if node == "" || seenNode[node] {
			continue
		}
		seenNode[node] = true
		labels := map[string]string{"kubernetes.io/hostname": node}
		if domain != "" {
			labels[slicebuilder.NVLinkDomainLabel(driverName)] = domain
			labels[slicebuilder.IMEXReadyLabel(driverName)] = "true"
			if !seenDomain[domain] {
				seenDomain[domain] = true
				domains = append(domains, domain)
			}
		}
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}})
	}
	for _, d := range domains {
		out = append(out, ChannelPool(driverName, d, channels))
	}
	return out, nodes
}

// ChannelPool is the ResourceSlice of one NVLink domain's IMEX channels,
// as gpudra-controller publishes it: channel-0 (shared) to channel-N
// (exclusive), for the nodes labelled with the domain.
func ChannelPool(driverName, domain string, channels int) *resourceapi.ResourceSlice {
	pool := slicebuilder.ChannelPoolName(domain)
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "nvlink-" + domain},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:       driverName,
			Pool:         resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			NodeSelector: slicebuilder.ChannelPoolSelector(driverName, domain),
		},
	}
	for n := 0; n <= channels; n++ {
		d := resourceapi.Device{Name: slicebuilder.ChannelDeviceName(n), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			slicebuilder.AttrType:         {StringValue: ptr.To(slicebuilder.TypeIMEXChannel)},
			slicebuilder.AttrChannel:      {IntValue: ptr.To(int64(n))},
			slicebuilder.AttrNVLinkDomain: {StringValue: ptr.To(domain)},
		}}
		if n == 0 {
			d.AllowMultipleAllocations = ptr.To(true)
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// ChannelClasses are the DeviceClasses of IMEX channels as the chart
// installs them for the default driver name: nvlink-channel.gpudra.io
// (one exclusive channel per claim) and nvlink-shared.gpudra.io (channel
// 0, which every claim of it shares). They stand in for the chart's
// deviceclasses/ files until those carry them.
func ChannelClasses() []*resourceapi.DeviceClass {
	return []*resourceapi.DeviceClass{
		Class("nvlink-channel.gpudra.io", "device.driver == 'gpu.gpudra.io' && device.attributes['gpu.gpudra.io'].type == 'imex-channel' && device.attributes['gpu.gpudra.io'].channel > 0"),
		Class("nvlink-shared.gpudra.io", "device.driver == 'gpu.gpudra.io' && device.attributes['gpu.gpudra.io'].type == 'imex-channel' && device.attributes['gpu.gpudra.io'].channel == 0"),
	}
}
