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
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// device checks one device: name, attribute and capacity limits, names,
// values, counter consumption and taints.
func (v validator) device(d resourceapi.Device) error {
	if msgs := content.IsDNS1123Label(d.Name); len(msgs) > 0 {
		return fmt.Errorf("name: %s", strings.Join(msgs, "; "))
	}
	if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		return fmt.Errorf("%d attributes and capacities, more than the limit of %d", n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
	}

	values := 0
	for _, name := range sortedKeys(d.Attributes) {
		if err := v.qualifiedName(name); err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
		n, err := validateAttribute(d.Attributes[name])
		if err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
		values += n
	}
	if values > resourceapi.ResourceSliceMaxAttributeValuesPerDevice {
		return fmt.Errorf("%d attribute values, more than the limit of %d", values, resourceapi.ResourceSliceMaxAttributeValuesPerDevice)
	}

	for _, name := range sortedKeys(d.Capacity) {
		if err := v.qualifiedName(name); err != nil {
			return fmt.Errorf("capacity %q: %w", name, err)
		}
		if q := d.Capacity[name].Value; q.Sign() < 0 {
			return fmt.Errorf("capacity %q: negative value %s", name, q.String())
		}
		if err := validateRequestPolicy(d.Capacity[name]); err != nil {
			return fmt.Errorf("capacity %q: %w", name, err)
		}
	}

	if n := len(d.ConsumesCounters); n > resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
		return fmt.Errorf("%d counter consumptions, more than the limit of %d", n, resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice)
	}
	for _, c := range d.ConsumesCounters {
		if n := len(c.Counters); n > resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption {
			return fmt.Errorf("consumption of counter set %q: %d counters, more than the limit of %d", c.CounterSet, n, resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption)
		}
	}
	return validateTaints(d.Taints)
}

func (v validator) qualifiedName(name resourceapi.QualifiedName) error {
	if v.validNames[name] {
		return nil
	}
	if err := validateQualifiedName(name); err != nil {
		return err
	}
	v.validNames[name] = true
	return nil
}

// validateQualifiedName checks "<id>" or "<domain>/<id>": the domain a DNS
// subdomain of at most 63 characters, the ID a C identifier of at most 32.
func validateQualifiedName(name resourceapi.QualifiedName) error {
	domain, id, qualified := strings.Cut(string(name), "/")
	if !qualified {
		id, domain = domain, ""
	}
	if qualified {
		if len(domain) > resourceapi.DeviceMaxDomainLength {
			return fmt.Errorf("domain longer than %d characters", resourceapi.DeviceMaxDomainLength)
		}
		if msgs := content.IsDNS1123Subdomain(domain); len(msgs) > 0 {
			return fmt.Errorf("domain: %s", strings.Join(msgs, "; "))
		}
	}
	if len(id) > resourceapi.DeviceMaxIDLength {
		return fmt.Errorf("ID longer than %d characters", resourceapi.DeviceMaxIDLength)
	}
	if msgs := content.IsCIdentifier(id); len(msgs) > 0 {
		return fmt.Errorf("ID: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// validateAttribute checks that exactly one value is set and that it fits,
// and returns how many values it counts against the per-device limit.
func validateAttribute(a resourceapi.DeviceAttribute) (int, error) {
	set, values := 0, 0
	count := func(present bool, n int) {
		if present {
			set++
			values += n
		}
	}
	count(a.IntValue != nil, 1)
	count(a.BoolValue != nil, 1)
	count(a.StringValue != nil, 1)
	count(a.VersionValue != nil, 1)
	count(a.IntValues != nil, len(a.IntValues))
	count(a.BoolValues != nil, len(a.BoolValues))
	count(a.StringValues != nil, len(a.StringValues))
	count(a.VersionValues != nil, len(a.VersionValues))
	if set != 1 {
		return 0, fmt.Errorf("%d values set, exactly one is required", set)
	}

	var strs []string
	isVersion := false
	switch {
	case a.StringValue != nil:
		strs = []string{*a.StringValue}
	case a.StringValues != nil:
		strs = a.StringValues
	case a.VersionValue != nil:
		strs, isVersion = []string{*a.VersionValue}, true
	case a.VersionValues != nil:
		strs, isVersion = a.VersionValues, true
	}
	for _, s := range strs {
		if len(s) > resourceapi.DeviceAttributeMaxValueLength {
			return 0, fmt.Errorf("value %q longer than %d characters", s, resourceapi.DeviceAttributeMaxValueLength)
		}
		if !isVersion {
			continue
		}
		// The same parser the API server and CEL's semver() use.
		if _, err := semver.Parse(s); err != nil {
			return 0, fmt.Errorf("value %q is not a semantic version: %w", s, err)
		}
	}
	return values, nil
}

func validateTaints(taints []resourceapi.DeviceTaint) error {
	if n := len(taints); n > resourceapi.DeviceTaintsMaxLength {
		return fmt.Errorf("%d taints, more than the limit of %d", n, resourceapi.DeviceTaintsMaxLength)
	}
	for _, t := range taints {
		if msgs := content.IsLabelKey(t.Key); len(msgs) > 0 {
			return fmt.Errorf("taint key %q: %s", t.Key, strings.Join(msgs, "; "))
		}
		if msgs := content.IsLabelValue(t.Value); len(msgs) > 0 {
			return fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, strings.Join(msgs, "; "))
		}
		switch t.Effect {
		case resourceapi.DeviceTaintEffectNone, resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute:
		case "":
			return fmt.Errorf("taint %q: effect is empty", t.Key)
		default:
			return fmt.Errorf("taint %q: unknown effect %q", t.Key, t.Effect)
		}
	}
	return nil
}

// sortedKeys makes the first reported error the same on every run.
func sortedKeys[V any](m map[resourceapi.QualifiedName]V) []resourceapi.QualifiedName {
	keys := make([]resourceapi.QualifiedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
