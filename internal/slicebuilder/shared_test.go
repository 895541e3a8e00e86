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

package slicebuilder

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestConsumableCapacity(t *testing.T) {
	res, err := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs, ConsumableCapacity: true})
	if err != nil {
		t.Fatal(err)
	}
	sl := res.Pools["node-a"].Slices
	whole := sl[0].Devices
	if len(whole) != 2 {
		t.Fatalf("%d whole GPUs", len(whole))
	}
	for _, d := range whole {
		if !ptr.Deref(d.AllowMultipleAllocations, false) {
			t.Errorf("%s does not allow multiple allocations", d.Name)
		}
		mem := d.Capacity[CapMemory]
		p := mem.RequestPolicy
		if p == nil || p.Default.Cmp(mem.Value) != 0 || p.ValidRange.Min.String() != "1Mi" || p.ValidRange.Step.String() != "1Mi" {
			t.Errorf("%s: memory request policy %+v: want default = all of %s, from 1Mi in steps of 1Mi", d.Name, p, mem.Value.String())
		}
		sms := d.Capacity[CapMultiprocessors]
		if p := sms.RequestPolicy; p == nil || !p.Default.IsZero() || !p.ValidRange.Min.IsZero() || p.ValidRange.Step.String() != "1" {
			t.Errorf("%s: multiprocessors request policy %+v: want default 0, from 0 in steps of 1", d.Name, p)
		}
		// A shared GPU whose placements are published (the spare,
		// gpu-1) still takes its whole MIG counter set: shares and
		// partitions of one GPU exclude each other.
		if want := map[string]int{"gpu-0": 0, "gpu-1": 1}[d.Name]; len(d.ConsumesCounters) != want {
			t.Errorf("%s consumes %d counter sets, want %d", d.Name, len(d.ConsumesCounters), want)
		}
	}
	// MIG placements are not shareable.
	for _, d := range sl[2].Devices {
		if d.AllowMultipleAllocations != nil {
			t.Errorf("MIG placement %s allows multiple allocations", d.Name)
		}
	}

	plain, err := Build(h100Node("node-a", 1), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range plain.Pools["node-a"].Slices[0].Devices {
		if d.AllowMultipleAllocations != nil || d.Capacity[CapMemory].RequestPolicy != nil {
			t.Errorf("%s is shareable without ConsumableCapacity", d.Name)
		}
	}
}

// TestConsumableCapacityOddMemory: memory that is not whole MiB gets no
// step (the default, all of it, must be a step from the minimum).
func TestConsumableCapacityOddMemory(t *testing.T) {
	node := h100Node("node-a", 1)
	node.GPUs[0].MemoryBytes = 80<<30 + 512
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, ConsumableCapacity: true})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Pools["node-a"].Slices[0].Devices[0].Capacity[CapMemory].RequestPolicy
	if p.ValidRange.Step != nil {
		t.Errorf("step %s on memory that is not whole MiB", p.ValidRange.Step.String())
	}
}

func TestValidateRequestPolicy(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	capacity := func(p *resourceapi.CapacityRequestPolicy) resourceapi.DeviceCapacity {
		return resourceapi.DeviceCapacity{Value: resource.MustParse("80Gi"), RequestPolicy: p}
	}
	tests := []struct {
		name    string
		policy  *resourceapi.CapacityRequestPolicy
		wantErr string
	}{
		{"none", nil, ""},
		{"gpudra's", &resourceapi.CapacityRequestPolicy{Default: q("80Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("1Mi"), Step: q("1Mi")}}, ""},
		{"no default", &resourceapi.CapacityRequestPolicy{}, "without a default"},
		{"default above the capacity", &resourceapi.CapacityRequestPolicy{Default: q("81Gi")}, "not between 0 and the capacity"},
		{"minimum above the default", &resourceapi.CapacityRequestPolicy{Default: q("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("2Gi")}}, "minimum"},
		{"default off the step", &resourceapi.CapacityRequestPolicy{Default: q("80Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("1Mi"), Step: q("3Gi")}}, "step"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validateRequestPolicy(capacity(tc.policy))
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validateRequestPolicy = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
