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

package nvlinkpools

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// domainAttribute reads a device's NVLink domain: the attribute in the
// driver's domain, written short (as gpudra publishes it) or qualified.
func domainAttribute(driverName string, d *resourceapi.Device) (string, bool) {
	for _, name := range []resourceapi.QualifiedName{
		slicebuilder.AttrNVLinkDomain,
		resourceapi.QualifiedName(driverName + "/" + string(slicebuilder.AttrNVLinkDomain)),
	} {
		if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue, true
		}
	}
	return "", false
}

// NodeDomain is a node's NVLink domain, from the ResourceSlices its
// plugin published (those of other drivers and cluster-scoped ones are
// skipped): the nvlinkDomain attribute its GPUs carry, "" when none
// does. Slices of an older generation of their pool are being replaced
// and do not count. GPUs that disagree, or a value that cannot be a label
// value, are an error: the node then belongs to no domain.
func NodeDomain(driverName, nodeName string, nodeSlices []*resourceapi.ResourceSlice) (string, error) {
	newest := map[string]int64{}
	for _, s := range nodeSlices {
		newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	var domains []string
	for _, s := range nodeSlices {
		if s.Spec.Driver != driverName || s.Spec.NodeName == nil || *s.Spec.NodeName != nodeName ||
			s.Spec.Pool.Generation < newest[s.Spec.Pool.Name] {
			continue
		}
		for i := range s.Spec.Devices {
			if d, ok := domainAttribute(driverName, &s.Spec.Devices[i]); ok && !slices.Contains(domains, d) {
				domains = append(domains, d)
			}
		}
	}
	switch len(domains) {
	case 0:
		return "", nil
	case 1:
		if errs := validation.IsValidLabelValue(domains[0]); len(errs) > 0 {
			return "", fmt.Errorf("node %s: the %s attribute %q of its GPUs is not a valid label value: %v", nodeName, slicebuilder.AttrNVLinkDomain, domains[0], errs)
		}
		return domains[0], nil
	default:
		slices.Sort(domains)
		return "", fmt.Errorf("node %s: its GPUs are in different NVLink domains %q (attribute %s); a node is in one domain or none, so it gets no domain label", nodeName, domains, slicebuilder.AttrNVLinkDomain)
	}
}
