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
	"strconv"
	"strings"
)

// NormalizeVersion turns an NVIDIA version string into strict semver
// (semver.org 2.0.0), which is what a VersionValue attribute must hold and
// what CEL's semver() compares:
//
//	"9.0"       → "9.0.0"      (compute capability: pad to three parts)
//	"535.104"   → "535.104.0"  (older drivers report two parts)
//	"560.28.03" → "560.28.3"   (semver forbids leading zeros)
//
// Anything else (empty, non-numeric, more than three parts) is an error
// rather than a guess: a version attribute that silently compares wrong is
// worse than a node that says clearly why it cannot publish.
func NormalizeVersion(v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("empty version")
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return "", fmt.Errorf("version %q: more than three numeric parts", v)
	}
	out := make([]string, 3)
	for i := range out {
		if i >= len(parts) {
			out[i] = "0"
			continue
		}
		n, err := parseNumericPart(parts[i])
		if err != nil {
			return "", fmt.Errorf("version %q: %w", v, err)
		}
		out[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(out, "."), nil
}

// parseNumericPart accepts a non-empty run of decimal digits; leading zeros
// are dropped by the round trip through uint64.
func parseNumericPart(p string) (uint64, error) {
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("part %q is not a non-negative decimal number", p)
	}
	return n, nil
}
