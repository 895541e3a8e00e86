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
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodesOf returns the nodes an inventory names, in natural order
// ("node-2" before "node-10"): every NodeName of a slice (and of a device
// with per-device node selection). An inventory whose slices all use node
// selectors or AllNodes gets one node, "node-1". Nodes carry the
// kubernetes.io/hostname label, as real ones do.
func NodesOf(slices []*resourceapi.ResourceSlice) []*v1.Node {
	var names []string
	for _, s := range slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			names = append(names, *s.Spec.NodeName)
		}
		for _, d := range s.Spec.Devices {
			if d.NodeName != nil && *d.NodeName != "" {
				names = append(names, *d.NodeName)
			}
		}
	}
	if len(names) == 0 {
		names = []string{"node-1"}
	}
	return NodesNamed(names)
}

// NodesNamed returns nodes of the given names, without duplicates, in
// natural order, as NodesOf does.
func NodesNamed(names []string) []*v1.Node {
	set := map[string]bool{}
	sorted := make([]string, 0, len(names))
	for _, n := range names {
		if !set[n] {
			set[n] = true
			sorted = append(sorted, n)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return NaturalLess(sorted[i], sorted[j]) })
	out := make([]*v1.Node, 0, len(sorted))
	for _, n := range sorted {
		out = append(out, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}})
	}
	return out
}

// NaturalLess orders "node-2" before "node-10".
func NaturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
