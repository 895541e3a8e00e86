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
	"regexp"
	"slices"
	"strings"

	"github.com/gpudra/gpudra/internal/gpu"
)

// MigProfiles says which MIG profiles a node publishes. Every placement
// of every published profile is a device the scheduler converts and
// evaluates on every claim it considers for the node, so an admin who
// uses a few profiles publishes only those (docs/mig.md, Performance).
//
// The zero value publishes every profile.
type MigProfiles struct {
	// None publishes no MIG placements: whole GPUs only, without counters,
	// as on a cluster without partitionable devices.
	None bool
	// Only, when not empty, lists the profiles published, by nvidia-smi's
	// name ("1g.10gb"); a GPU model without one of them publishes the
	// others.
	Only []string
}

// profileName is a MIG profile name as nvidia-smi spells it: "1g.10gb",
// "1c.3g.20gb" is not a GPU instance profile, "1g.10gb+me", "1g.24gb-me",
// "1g.24gb+me.all", "1g.24gb+gfx".
var profileName = regexp.MustCompile(`^[1-9][0-9]*g\.[1-9][0-9]*gb([+-][a-z]+(\.[a-z]+)?)?$`)

// ParseMigProfiles reads the --mig-profiles flag: "all", "none", or a
// comma-separated list of profile names.
func ParseMigProfiles(s string) (MigProfiles, error) {
	switch strings.TrimSpace(s) {
	case "", "all":
		return MigProfiles{}, nil
	case "none":
		return MigProfiles{None: true}, nil
	}
	var out MigProfiles
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !profileName.MatchString(name) {
			return MigProfiles{}, fmt.Errorf("MIG profile %q: want all, none, or GPU instance profile names as nvidia-smi mig -lgip prints them, e.g. 1g.10gb,3g.40gb,7g.80gb", name)
		}
		if slices.Contains(out.Only, name) {
			return MigProfiles{}, fmt.Errorf("MIG profile %q listed twice", name)
		}
		out.Only = append(out.Only, name)
	}
	return out, nil
}

// String is the flag's spelling.
func (p MigProfiles) String() string {
	switch {
	case p.None:
		return "none"
	case len(p.Only) == 0:
		return "all"
	default:
		return strings.Join(p.Only, ",")
	}
}

// publishesAny reports whether any profile of the GPU is published: a GPU
// with none is published whole, without counters.
func (p MigProfiles) publishesAny(m *gpu.MIG) bool {
	for _, prof := range m.Profiles {
		if p.publishes(prof.Name) {
			return true
		}
	}
	return false
}

// publishes reports whether the profile's placements are published.
func (p MigProfiles) publishes(name string) bool {
	return !p.None && (len(p.Only) == 0 || slices.Contains(p.Only, name))
}
