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
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Consumable capacity (KEP-5075, DRAConsumableCapacity): with
// Options.ConsumableCapacity a whole GPU allows multiple allocations, and
// each claim consumes a share of its capacity:
//
//   - memory: a claim asks for capacity.requests.memory (in steps of
//     1Mi); a claim that does not ask consumes all of it, i.e. takes the
//     whole GPU, as it would without consumable capacity;
//   - multiprocessors: a claim may ask for a number of them (with MPS it
//     becomes its active thread percentage); one that does not ask
//     consumes none, so that memory-only shares pack.
//
// The scheduler packs claims onto a GPU until one of its capacities is
// used up. The shares are accounting, nothing more: only MPS (its pinned
// memory limit and active thread percentage, which the plugin derives
// from the share) enforces them on the GPU.
//
// A shared GPU keeps consuming its whole MIG counter set: the first share
// takes all of it, further shares take nothing more (the allocator charges
// a multi-allocatable device's counters once), so a GPU is either shared
// whole or cut into MIG partitions, never both, and the scheduler decides
// which by whichever claim comes first.

var (
	oneMi = resource.MustParse("1Mi")
	zero  = *resource.NewQuantity(0, resource.DecimalSI)
	one   = *resource.NewQuantity(1, resource.DecimalSI)
)

// makeShareable turns a whole GPU device into one that allows multiple
// allocations, with request policies on its capacities.
func makeShareable(d *resourceapi.Device) {
	d.AllowMultipleAllocations = ptr.To(true)
	if c, ok := d.Capacity[CapMemory]; ok {
		total := c.Value.DeepCopy()
		rng := &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(oneMi.DeepCopy())}
		// The default (the whole memory) must be a step from the
		// minimum; real GPUs report whole MiB, but do not count on it.
		if total.Value()%oneMi.Value() == 0 {
			rng.Step = ptr.To(oneMi.DeepCopy())
		}
		c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: &total, ValidRange: rng}
		d.Capacity[CapMemory] = c
	}
	if c, ok := d.Capacity[CapMultiprocessors]; ok {
		c.RequestPolicy = &resourceapi.CapacityRequestPolicy{
			Default:    ptr.To(zero.DeepCopy()),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(zero.DeepCopy()), Step: ptr.To(one.DeepCopy())},
		}
		d.Capacity[CapMultiprocessors] = c
	}
}

// validateRequestPolicy checks what the API server checks of a capacity's
// request policy: the default and the range lie within the capacity, and
// the default and the capacity sit on a step from the minimum.
func validateRequestPolicy(c resourceapi.DeviceCapacity) error {
	p := c.RequestPolicy
	if p == nil {
		return nil
	}
	if p.Default == nil {
		return fmt.Errorf("request policy without a default")
	}
	if p.Default.Sign() < 0 || p.Default.Cmp(c.Value) > 0 {
		return fmt.Errorf("request policy default %s is not between 0 and the capacity %s", p.Default.String(), c.Value.String())
	}
	r := p.ValidRange
	if r == nil {
		return nil
	}
	if r.Min == nil || r.Min.Sign() < 0 || r.Min.Cmp(c.Value) > 0 || p.Default.Cmp(*r.Min) < 0 {
		return fmt.Errorf("request policy range minimum must lie between 0 and the default")
	}
	if r.Step != nil {
		step := r.Step.Value()
		if step <= 0 || r.Min.Value()+step > c.Value.Value() || (p.Default.Value()-r.Min.Value())%step != 0 {
			return fmt.Errorf("request policy step %s does not fit the range from %s to the default %s within %s", r.Step.String(), r.Min.String(), p.Default.String(), c.Value.String())
		}
	}
	return nil
}
