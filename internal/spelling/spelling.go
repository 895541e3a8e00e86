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

// Package spelling finds the name a user probably meant: the closest of a
// list of known names, for "did you mean" hints.
package spelling

import "strings"

// Closest returns the candidate closest to name (case-insensitive edit
// distance), or "" when none is close enough to be a likely typo: at most
// a third of the name's length (and at least one edit) away. A candidate
// that differs only in case is always close.
func Closest(name string, candidates []string) string {
	best, bestD := "", 4
	for _, c := range candidates {
		d := distance(strings.ToLower(name), strings.ToLower(c))
		if d < bestD && d <= max(1, len(name)/3) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of two strings.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
