package check

import (
	"fmt"
	"strings"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// KubernetesVersions are the versions --kubernetes-version accepts.
var KubernetesVersions = []string{"1.34", "1.35", "1.36", "1.37"}

// DefaultKubernetesVersion is the newest supported version.
const DefaultKubernetesVersion = "1.37"

// versionFeatures are the DRA features a scheduler and API server of one
// Kubernetes version enable by default (feature gates as in
// k8s.io/kubernetes pkg/features, mapped to allocator features as the
// scheduler's dynamicresources plugin does in AllocatorFeatures).
type versionFeatures struct {
	allocator structured.Features
	cel       cel.Features
}

func featuresFor(version string) (versionFeatures, error) {
	version = strings.TrimPrefix(version, "v")
	switch version {
	case "1.34", "1.35":
		// DRAAdminAccess and DRAPrioritizedList beta (on);
		// DRAPartitionableDevices, DRADeviceTaints, DRAConsumableCapacity,
		// DRADeviceBindingConditions alpha (off).
		return versionFeatures{allocator: structured.Features{
			AdminAccess:     true,
			PrioritizedList: true,
		}}, nil
	case "1.36", "1.37":
		// 1.36: DRAPartitionableDevices, DRADeviceTaints,
		// DRAConsumableCapacity, DRADeviceBindingConditions beta (on).
		// 1.37 adds no default-on allocator feature: DRAFractionalCapacityRange
		// is on only with a minimum compatibility version of 1.37, and the
		// new gates are alpha.
		return versionFeatures{
			allocator: structured.Features{
				AdminAccess:            true,
				ConsumableCapacity:     true,
				DeviceBindingAndStatus: true,
				DeviceTaints:           true,
				PartitionableDevices:   true,
				PrioritizedList:        true,
			},
			cel: cel.Features{EnableConsumableCapacity: true},
		}, nil
	}
	return versionFeatures{}, fmt.Errorf("--kubernetes-version %q is not supported (valid: %s)", version, strings.Join(KubernetesVersions, ", "))
}
