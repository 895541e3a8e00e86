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

package scheduler

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// KubernetesVersions are the Kubernetes versions whose feature sets this
// package knows.
var KubernetesVersions = []string{"1.34", "1.35", "1.36", "1.37"}

// DefaultKubernetesVersion is the newest of KubernetesVersions.
const DefaultKubernetesVersion = "1.37"

// Features are the DRA features a Kubernetes version's scheduler and API
// server enable with their default feature gates (as in k8s.io/kubernetes
// pkg/features), mapped to the allocator's features as the scheduler's
// dynamicresources plugin maps them.
type Features struct {
	// Version is "1.34" … "1.37".
	Version   string
	Allocator structured.Features
	CEL       cel.Features
	// ExtendedResource (DRAExtendedResource): a pod's extended resources
	// (nvidia.com/gpu: 1) are allocated from the DeviceClass with that
	// extendedResourceName, when no device plugin on the node offers them.
	ExtendedResource bool
	// DeviceTaintRules (DRADeviceTaintRules): DeviceTaintRule objects
	// taint the devices they select.
	DeviceTaintRules bool
}

// FeaturesFor returns the feature set of a Kubernetes version ("1.36" or
// "v1.36").
func FeaturesFor(version string) (Features, error) {
	version = strings.TrimPrefix(version, "v")
	switch version {
	case "1.34", "1.35":
		// DRAAdminAccess and DRAPrioritizedList beta (on);
		// DRAPartitionableDevices, DRADeviceTaints, DRAConsumableCapacity,
		// DRADeviceBindingConditions, DRAExtendedResource alpha (off);
		// DRADeviceTaintRules alpha in 1.35 (off).
		return Features{Version: version, Allocator: structured.Features{
			AdminAccess:     true,
			PrioritizedList: true,
		}}, nil
	case "1.36", "1.37":
		// 1.36: DRAPartitionableDevices, DRADeviceTaints,
		// DRAConsumableCapacity, DRADeviceBindingConditions and
		// DRAExtendedResource beta (on); DRADeviceTaintRules beta but off
		// (its API is off by default). 1.37: DRAExtendedResource and
		// DRADeviceTaintRules GA (on); DRAFractionalCapacityRange is on
		// only with a minimum compatibility version of 1.37, and the new
		// gates are alpha.
		return Features{
			Version: version,
			Allocator: structured.Features{
				AdminAccess:            true,
				ConsumableCapacity:     true,
				DeviceBindingAndStatus: true,
				DeviceTaints:           true,
				PartitionableDevices:   true,
				PrioritizedList:        true,
			},
			CEL:              cel.Features{EnableConsumableCapacity: true},
			ExtendedResource: true,
			DeviceTaintRules: version == "1.37",
		}, nil
	}
	return Features{}, fmt.Errorf("version %q of Kubernetes is not supported (valid: %s)", version, strings.Join(KubernetesVersions, ", "))
}

// DefaultFeatures is the feature set of DefaultKubernetesVersion.
func DefaultFeatures() Features {
	f, err := FeaturesFor(DefaultKubernetesVersion)
	if err != nil {
		panic(err) // the default is one of the versions above
	}
	return f
}

// DropDisabledFields removes from a ResourceSlice what the API server of
// the feature set drops on create and update, as its registry strategy
// does for features that are off (k8s.io/kubernetes
// pkg/registry/resource/resourceslice/strategy.go, dropDisabledFields):
// device taints without DRADeviceTaints; shared counters, counter
// consumption and per-device node selection without
// DRAPartitionableDevices; allowMultipleAllocations and capacity request
// policies without DRAConsumableCapacity; binding conditions without
// DRADeviceBindingConditions. It reports whether it dropped anything.
func DropDisabledFields(slice *resourceapi.ResourceSlice, f Features) bool {
	dropped := false
	spec := &slice.Spec
	if !f.Allocator.PartitionableDevices {
		if len(spec.SharedCounters) > 0 || spec.PerDeviceNodeSelection != nil {
			dropped = true
		}
		spec.SharedCounters, spec.PerDeviceNodeSelection = nil, nil
	}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if !f.Allocator.DeviceTaints && len(d.Taints) > 0 {
			d.Taints, dropped = nil, true
		}
		if !f.Allocator.PartitionableDevices {
			if len(d.ConsumesCounters) > 0 || d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil {
				dropped = true
			}
			d.ConsumesCounters, d.NodeName, d.NodeSelector, d.AllNodes = nil, nil, nil, nil
		}
		if !f.Allocator.ConsumableCapacity {
			if d.AllowMultipleAllocations != nil {
				d.AllowMultipleAllocations, dropped = nil, true
			}
			for name, c := range d.Capacity {
				if c.RequestPolicy != nil {
					c.RequestPolicy, dropped = nil, true
					d.Capacity[name] = c
				}
			}
		}
		if !f.Allocator.DeviceBindingAndStatus && (len(d.BindingConditions) > 0 || len(d.BindingFailureConditions) > 0 || d.BindsToNode != nil) {
			d.BindingConditions, d.BindingFailureConditions, d.BindsToNode, dropped = nil, nil, nil, true
		}
	}
	return dropped
}

// Serves says whether the API server of the feature set serves a
// resource.k8s.io kind in a version with its default configuration:
// resource.k8s.io/v1 (DeviceTaintRule only with DRADeviceTaintRules);
// the beta versions v1beta1 and v1beta2 and the alpha v1alpha3 are off by
// default in every release from 1.34 on (k8s.io/kubernetes
// pkg/controlplane/instance.go, betaAPIGroupVersionsDisabledByDefault,
// alphaAPIGroupVersionsDisabledByDefault) and need the admin's
// --runtime-config.
func (f Features) Serves(version, kind string) bool {
	if version != "v1" {
		return false
	}
	return kind != "DeviceTaintRule" || f.DeviceTaintRules
}
