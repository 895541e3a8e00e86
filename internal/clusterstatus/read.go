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

package clusterstatus

import (
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// deviceKey names a device in a pool.
type deviceKey struct{ pool, device string }

// published is one device as the newest slices of its pool publish it.
type published struct {
	node string
	dev  resourceapi.Device
}

// heldDevice is a claim's hold on one device.
type heldDevice struct {
	Holder
	admin bool
}

// publishedDevices indexes the driver's devices in the newest generation
// of each pool (the scheduler ignores older ones), and lists the pools.
func publishedDevices(sl []resourceapi.ResourceSlice, driver string) (map[deviceKey]published, []string, map[string]map[string]map[string]resource.Quantity) {
	newest := map[string]int64{}
	for _, s := range sl {
		if s.Spec.Driver != driver {
			continue
		}
		if g, ok := newest[s.Spec.Pool.Name]; !ok || s.Spec.Pool.Generation > g {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	out := map[deviceKey]published{}
	counters := map[string]map[string]map[string]resource.Quantity{} // pool, counter set, counter
	for _, s := range sl {
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, cs := range s.Spec.SharedCounters {
			if counters[s.Spec.Pool.Name] == nil {
				counters[s.Spec.Pool.Name] = map[string]map[string]resource.Quantity{}
			}
			set := map[string]resource.Quantity{}
			for name, c := range cs.Counters {
				set[name] = c.Value.DeepCopy()
			}
			counters[s.Spec.Pool.Name][cs.Name] = set
		}
		node := s.Spec.Pool.Name
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			node = *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			out[deviceKey{s.Spec.Pool.Name, d.Name}] = published{node: node, dev: d}
		}
	}
	pools := make([]string, 0, len(newest))
	for p := range newest {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	return out, pools, counters
}

// allocations are the devices of the driver that claims hold, with the
// status the plugin reported for each.
func allocations(claims []resourceapi.ResourceClaim, driver, namespace string) map[deviceKey][]heldDevice {
	out := map[deviceKey][]heldDevice{}
	for _, c := range claims {
		alloc := c.Status.Allocation
		if alloc == nil {
			continue
		}
		var pods []string
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.APIGroup == "" {
				pods = append(pods, r.Name)
			}
		}
		sort.Strings(pods)
		hidden := namespace != "" && c.Namespace != namespace
		for _, r := range alloc.Devices.Results {
			if r.Driver != driver {
				continue
			}
			h := heldDevice{Holder: Holder{Namespace: c.Namespace, Claim: c.Name, Request: r.Request, Pods: pods, Hidden: hidden},
				admin: r.AdminAccess != nil && *r.AdminAccess}
			if r.ShareID != nil {
				h.ShareID = string(*r.ShareID)
			}
			if q, ok := r.ConsumedCapacity[slicebuilder.CapMemory]; ok {
				q := q.DeepCopy()
				h.Memory = &q
			}
			for _, st := range c.Status.Devices {
				if st.Driver != driver || st.Pool != r.Pool || st.Device != r.Device || ptrString(st.ShareID) != h.ShareID {
					continue
				}
				for _, cond := range st.Conditions {
					if cond.Type == "Ready" && cond.Status == "True" {
						h.Prepared = true
					}
				}
				if st.Data != nil {
					if ds, err := configapi.DecodeDeviceStatus(st.Data.Raw); err == nil {
						h.Status = ds
					}
				}
			}
			if hidden {
				h.Holder = Holder{Hidden: true, ShareID: h.ShareID, Memory: h.Memory, Prepared: h.Prepared}
			}
			k := deviceKey{r.Pool, r.Device}
			out[k] = append(out[k], h)
		}
	}
	return out
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describe fills in what a whole GPU's (or its monitoring device's)
// attributes say.
func describe(g *GPU, d resourceapi.Device) {
	g.UUID = stringAttr(d, slicebuilder.AttrUUID)
	g.Model = stringAttr(d, slicebuilder.AttrProductName)
	g.PCIBusID = stringAttr(d, slicebuilder.AttrPCIBusID)
	g.NVLinkDomain = stringAttr(d, slicebuilder.AttrNVLinkDomain)
	if a, ok := d.Attributes[slicebuilder.AttrIMEXReady]; ok && a.BoolValue != nil {
		g.IMEXReady = ptr.To(*a.BoolValue)
	}
	if c, ok := d.Capacity[slicebuilder.CapMemory]; ok {
		q := c.Value.DeepCopy()
		g.Memory = &q
	}
}

func stringAttr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func hasNoSchedule(d resourceapi.Device) bool {
	for _, t := range d.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}
