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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Validate checks resources against the resource.k8s.io/v1 rules that the
// API server enforces on each ResourceSlice, plus the pool-wide ones it
// cannot see (device names unique in a pool), so that a mistake shows up
// as a clear error at build time rather than as a rejected write that the
// ResourceSlice controller retries forever. It is exported for the
// offline CLI, which checks slices it reads from files.
//
// It covers what gpudra can get wrong; it is not a copy of the API
// server's validation.
func Validate(driverName string, res resourceslice.DriverResources) error {
	if err := validateDriverName(driverName); err != nil {
		return err
	}
	// Sorted so that the first error reported is the same on every run.
	names := make([]string, 0, len(res.Pools))
	for name := range res.Pools {
		names = append(names, name)
	}
	slices.Sort(names)
	v := validator{validNames: map[resourceapi.QualifiedName]bool{}}
	for _, name := range names {
		if err := v.pool(name, res.Pools[name]); err != nil {
			return fmt.Errorf("pool %q: %w", name, err)
		}
	}
	return nil
}

func validateDriverName(name string) error {
	if name == "" {
		return errors.New("driver name is empty")
	}
	if len(name) > resourceapi.DriverNameMaxLength {
		return fmt.Errorf("driver name %q: longer than %d characters", name, resourceapi.DriverNameMaxLength)
	}
	if msgs := content.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("driver name %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// validatePoolName applies the pool-name rule: DNS subdomains separated by
// slashes, 253 characters at most. A node name always passes.
func validatePoolName(name string) error {
	if name == "" {
		return errors.New("pool name is empty")
	}
	if len(name) > resourceapi.PoolNameMaxLength {
		return fmt.Errorf("pool name %q: longer than %d characters", name, resourceapi.PoolNameMaxLength)
	}
	for _, part := range strings.Split(name, "/") {
		if msgs := content.IsDNS1123Subdomain(part); len(msgs) > 0 {
			return fmt.Errorf("pool name %q: %s", name, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// validator carries what one Validate call has already checked.
type validator struct {
	// validNames are attribute and capacity names known to be valid. Every
	// device repeats the same dozen names, and checking each with the
	// regular expressions again made up half of Build's time.
	validNames map[resourceapi.QualifiedName]bool
}

func (v validator) pool(name string, pool resourceslice.Pool) error {
	if err := validatePoolName(name); err != nil {
		return err
	}
	devices := map[string]int{}
	counterSets := map[string]int{}
	for i, s := range pool.Slices {
		if err := v.slice(s); err != nil {
			return fmt.Errorf("slice %d: %w", i, err)
		}
		for _, d := range s.Devices {
			if prev, dup := devices[d.Name]; dup {
				return fmt.Errorf("device %q is in slice %d and slice %d", d.Name, prev, i)
			}
			devices[d.Name] = i
		}
		for _, cs := range s.SharedCounters {
			if prev, dup := counterSets[cs.Name]; dup {
				return fmt.Errorf("counter set %q is in slice %d and slice %d", cs.Name, prev, i)
			}
			counterSets[cs.Name] = i
		}
	}
	// Every consumption names a counter set of the pool and counters it
	// has: the API server cannot check this across slices, and the
	// allocator would find such a device never fits.
	sets := map[string]resourceapi.CounterSet{}
	for _, s := range pool.Slices {
		for _, cs := range s.SharedCounters {
			sets[cs.Name] = cs
		}
	}
	for _, s := range pool.Slices {
		for _, d := range s.Devices {
			for _, c := range d.ConsumesCounters {
				cs, ok := sets[c.CounterSet]
				if !ok {
					return fmt.Errorf("device %q consumes counter set %q, which the pool does not have", d.Name, c.CounterSet)
				}
				for _, name := range slices.Sorted(maps.Keys(c.Counters)) {
					if _, ok := cs.Counters[name]; !ok {
						return fmt.Errorf("device %q consumes counter %q, which counter set %q does not have", d.Name, name, c.CounterSet)
					}
				}
			}
		}
	}
	return nil
}

func (v validator) slice(s resourceslice.Slice) error {
	if len(s.Devices) > 0 && len(s.SharedCounters) > 0 {
		return errors.New("has both devices and shared counters; resource.k8s.io/v1 allows only one of them per slice")
	}
	if n := len(s.SharedCounters); n > resourceapi.ResourceSliceMaxCounterSets {
		return fmt.Errorf("%d counter sets, more than the limit of %d", n, resourceapi.ResourceSliceMaxCounterSets)
	}
	for _, cs := range s.SharedCounters {
		if n := len(cs.Counters); n > resourceapi.ResourceSliceMaxCountersPerCounterSet {
			return fmt.Errorf("counter set %q: %d counters, more than the limit of %d", cs.Name, n, resourceapi.ResourceSliceMaxCountersPerCounterSet)
		}
		if msgs := content.IsDNS1123Label(cs.Name); len(msgs) > 0 {
			return fmt.Errorf("counter set %q: %s", cs.Name, strings.Join(msgs, "; "))
		}
		for name := range cs.Counters {
			if msgs := content.IsDNS1123Label(name); len(msgs) > 0 {
				return fmt.Errorf("counter set %q: counter %q: %s", cs.Name, name, strings.Join(msgs, "; "))
			}
		}
	}

	limit := resourceapi.ResourceSliceMaxDevices
	for _, d := range s.Devices {
		if usesAdvancedFeatures(d) {
			limit = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			break
		}
	}
	if n := len(s.Devices); n > limit {
		return fmt.Errorf("%d devices, more than the limit of %d", n, limit)
	}
	for _, d := range s.Devices {
		if err := v.device(d); err != nil {
			return fmt.Errorf("device %q: %w", d.Name, err)
		}
	}
	return nil
}

// usesAdvancedFeatures reports whether d lowers its slice's device limit
// to ResourceSliceMaxDevicesWithAdvancedFeatures: taints, counter
// consumption or list-typed attributes.
func usesAdvancedFeatures(d resourceapi.Device) bool {
	if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
		return true
	}
	for _, a := range d.Attributes {
		if a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil {
			return true
		}
	}
	return false
}
