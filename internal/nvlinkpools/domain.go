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

// imexReadyAttribute reads a device's AttrIMEXReady, short or qualified.
func imexReadyAttribute(driverName string, d *resourceapi.Device) (bool, bool) {
	for _, name := range []resourceapi.QualifiedName{
		slicebuilder.AttrIMEXReady,
		resourceapi.QualifiedName(driverName + "/" + string(slicebuilder.AttrIMEXReady)),
	} {
		if a, ok := d.Attributes[name]; ok && a.BoolValue != nil {
			return *a.BoolValue, true
		}
	}
	return false, false
}

// NodeIMEXReady says whether a node's IMEX daemon can serve new
// multi-node work, from the slices its plugin published: false when a GPU
// of the newest generation says imexReady false. A plugin that does not
// check the daemon publishes no imexReady, and its node counts as ready:
// the admin vouches for the daemon (--imex-daemon=none), or the plugin is
// older than the check and its node must not lose its channels in a
// rolling upgrade.
func NodeIMEXReady(driverName, nodeName string, nodeSlices []*resourceapi.ResourceSlice) bool {
	newest := map[string]int64{}
	for _, s := range nodeSlices {
		newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	for _, s := range nodeSlices {
		if s.Spec.Driver != driverName || s.Spec.NodeName == nil || *s.Spec.NodeName != nodeName ||
			s.Spec.Pool.Generation < newest[s.Spec.Pool.Name] {
			continue
		}
		for i := range s.Spec.Devices {
			if ready, ok := imexReadyAttribute(driverName, &s.Spec.Devices[i]); ok && !ready {
				return false
			}
		}
	}
	return true
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
