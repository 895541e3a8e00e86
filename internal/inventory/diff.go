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

// Package inventory compares what two nodes publish: the devices, their
// attributes and capacities, and the counter sets of their ResourceSlices.
// `gpudra inventory --compare <profile>` uses it to show an admin how a real
// node differs from the fake profile that gpudra check, gpudra simulate and
// the e2e suite stand it in for.
package inventory

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Which attributes differ between any two nodes, even of the same
// hardware, is slicebuilder.Variations. Differences in identities and
// addresses (PerGPU, PerMachine: UUIDs, PCI addresses) are not reported;
// of a tray's place in its rack and fabric (PerTray, PerFabric) only
// whether a device has them is compared (a tray whose NVLink fabric is
// not ready has none).

// nodeSpecific reports whether differences in an attribute are not
// reported at all.
func nodeSpecific(a resourceapi.QualifiedName) bool {
	v := slicebuilder.Variations[a]
	return v == slicebuilder.PerGPU || v == slicebuilder.PerMachine
}

// rackSpecific reports whether only an attribute's presence is compared.
func rackSpecific(a resourceapi.QualifiedName) bool {
	v := slicebuilder.Variations[a]
	return v == slicebuilder.PerTray || v == slicebuilder.PerFabric
}

// Diff lists, one line each, how the devices and counter sets of got
// differ from want's: devices or counter sets only one has, and
// attributes, capacities, counters and counter consumption that differ.
// Node-specific attributes (UUIDs, PCI addresses) are not compared, and
// of a tray's place in its NVLink fabric and rack only the presence.
func Diff(got, want []*resourceapi.ResourceSlice) []string {
	var out []string
	gd, wd := devices(got), devices(want)
	for _, name := range keys(gd, wd) {
		g, gok := gd[name]
		w, wok := wd[name]
		switch {
		case !wok:
			out = append(out, fmt.Sprintf("device %s: only here", name))
		case !gok:
			out = append(out, fmt.Sprintf("device %s: only in the comparison", name))
		default:
			out = append(out, deviceDiff(name, g, w)...)
		}
	}
	gc, wc := counterSets(got), counterSets(want)
	for _, name := range keys(gc, wc) {
		g, gok := gc[name]
		w, wok := wc[name]
		switch {
		case !wok:
			out = append(out, fmt.Sprintf("counter set %s: only here", name))
		case !gok:
			out = append(out, fmt.Sprintf("counter set %s: only in the comparison", name))
		default:
			for _, c := range keys(g.Counters, w.Counters) {
				if v, u := g.Counters[c], w.Counters[c]; v.Value.Cmp(u.Value) != 0 {
					out = append(out, fmt.Sprintf("counter set %s: %s is %s here, %s in the comparison", name, c, show(v.Value.String(), g.Counters, c), show(u.Value.String(), w.Counters, c)))
				}
			}
		}
	}
	return out
}

func deviceDiff(name string, g, w resourceapi.Device) []string {
	var out []string
	for _, a := range keys(g.Attributes, w.Attributes) {
		if nodeSpecific(a) {
			continue
		}
		v, vok := g.Attributes[a]
		u, uok := w.Attributes[a]
		if rackSpecific(a) && vok && uok {
			continue
		}
		if vok != uok || attrString(v) != attrString(u) {
			out = append(out, fmt.Sprintf("device %s: attribute %s is %s here, %s in the comparison", name, a, attrOr(v, vok), attrOr(u, uok)))
		}
	}
	for _, c := range keys(g.Capacity, w.Capacity) {
		v, vok := g.Capacity[c]
		u, uok := w.Capacity[c]
		if vok != uok || v.Value.Cmp(u.Value) != 0 {
			out = append(out, fmt.Sprintf("device %s: capacity %s is %s here, %s in the comparison", name, c, capOr(v, vok), capOr(u, uok)))
		}
	}
	gc, wc := consumption(g), consumption(w)
	for _, c := range keys(gc, wc) {
		if gc[c] != wc[c] {
			out = append(out, fmt.Sprintf("device %s: consumes %s of %s here, %s in the comparison", name, c, orAbsent(gc[c]), orAbsent(wc[c])))
		}
	}
	return out
}

func orAbsent(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func devices(sl []*resourceapi.ResourceSlice) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

func counterSets(sl []*resourceapi.ResourceSlice) map[string]resourceapi.CounterSet {
	out := map[string]resourceapi.CounterSet{}
	for _, s := range sl {
		for _, cs := range s.Spec.SharedCounters {
			out[cs.Name] = cs
		}
	}
	return out
}

// keys are the keys of both maps, sorted.
func keys[K ~string, V any](a, b map[K]V) []K {
	var out []K
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func attrString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return fmt.Sprintf("%q", *a.StringValue)
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	case a.VersionValue != nil:
		return "version " + *a.VersionValue
	default:
		return "(none)"
	}
}

func attrOr(a resourceapi.DeviceAttribute, ok bool) string {
	if !ok {
		return "absent"
	}
	return attrString(a)
}

func capOr(c resourceapi.DeviceCapacity, ok bool) string {
	if !ok {
		return "absent"
	}
	return c.Value.String()
}

func show(v string, m map[string]resourceapi.Counter, k string) string {
	if _, ok := m[k]; !ok {
		return "absent"
	}
	return v
}

// consumption is what a device consumes, by "counter set/counter".
func consumption(d resourceapi.Device) map[string]string {
	out := map[string]string{}
	for _, cc := range d.ConsumesCounters {
		for k, v := range cc.Counters {
			out[cc.CounterSet+"/"+k] = v.Value.String()
		}
	}
	return out
}
