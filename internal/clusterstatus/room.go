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
	"cmp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// span is a MIG placement's memory slices.
type span struct{ start, size int }

func (a span) overlaps(b span) bool { return a.start < b.start+b.size && b.start < a.start+a.size }

// room counts, per profile, how many more partitions of that profile the
// GPU could take: its published placements that no claim holds and no
// NoSchedule taint blocks, given out by start as long as what is left of
// the counters (the GPU's counter sets less what the held partitions
// consume) allows, and none overlapping a held partition.
func room(placements []published, isHeld func(string) bool, heldDevs []resourceapi.Device, taken []span, sets map[string]map[string]resource.Quantity) map[string]int {
	left := map[string]map[string]resource.Quantity{}
	for name, set := range sets {
		c := map[string]resource.Quantity{}
		for k, v := range set {
			c[k] = v.DeepCopy()
		}
		left[name] = c
	}
	consume(left, heldDevs)
	byProfile := map[string][]resourceapi.Device{}
	for _, p := range placements {
		if isHeld(p.dev.Name) || hasNoSchedule(p.dev) {
			continue
		}
		prof := stringAttr(p.dev, slicebuilder.AttrProfile)
		byProfile[prof] = append(byProfile[prof], p.dev)
	}
	var out map[string]int
	for prof, devs := range byProfile {
		slices.SortFunc(devs, func(a, b resourceapi.Device) int {
			sa, _, _ := slicebuilder.Placement(a)
			sb, _, _ := slicebuilder.Placement(b)
			return cmp.Compare(sa, sb)
		})
		rem := map[string]map[string]resource.Quantity{}
		for name, set := range left {
			c := map[string]resource.Quantity{}
			for k, v := range set {
				c[k] = v.DeepCopy()
			}
			rem[name] = c
		}
		used := slices.Clone(taken)
		n := 0
		for _, d := range devs {
			start, size, _ := slicebuilder.Placement(d)
			sp := span{start, max(size, 1)}
			if slices.ContainsFunc(used, sp.overlaps) || !fits(rem, d) {
				continue
			}
			consume(rem, []resourceapi.Device{d})
			used = append(used, sp)
			n++
		}
		if n > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[prof] = n
		}
	}
	return out
}

// fits says whether what d consumes is left.
func fits(left map[string]map[string]resource.Quantity, d resourceapi.Device) bool {
	for _, c := range d.ConsumesCounters {
		set, ok := left[c.CounterSet]
		if !ok {
			continue // a counter set not published: the overlap check decides
		}
		for name, want := range c.Counters {
			if have, ok := set[name]; !ok || have.Cmp(want.Value) < 0 {
				return false
			}
		}
	}
	return true
}

func consume(left map[string]map[string]resource.Quantity, devs []resourceapi.Device) {
	for _, d := range devs {
		for _, c := range d.ConsumesCounters {
			set, ok := left[c.CounterSet]
			if !ok {
				continue
			}
			for name, want := range c.Counters {
				if have, ok := set[name]; ok {
					have.Sub(want.Value)
					set[name] = have
				}
			}
		}
	}
}
