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
	"reflect"
	"strings"
	"testing"
)

func TestParseMigProfiles(t *testing.T) {
	tests := []struct {
		in      string
		want    MigProfiles
		wantErr string
	}{
		{in: "all", want: MigProfiles{}},
		{in: "", want: MigProfiles{}},
		{in: "none", want: MigProfiles{None: true}},
		{in: "1g.10gb, 3g.40gb,7g.80gb", want: MigProfiles{Only: []string{"1g.10gb", "3g.40gb", "7g.80gb"}}},
		{in: "1g.10gb+me,1g.24gb-me,1g.24gb+me.all", want: MigProfiles{Only: []string{"1g.10gb+me", "1g.24gb-me", "1g.24gb+me.all"}}},
		{in: "1g10gb", wantErr: `"1g10gb"`},
		{in: "1g.10gb,", wantErr: `""`},
		{in: "1g.10gb,1g.10gb", wantErr: "twice"},
		{in: "1c.3g.20gb", wantErr: "GPU instance profile"},
	}
	for _, tc := range tests {
		got, err := ParseMigProfiles(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseMigProfiles(%q) = %v, %v; want an error with %s", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseMigProfiles(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, _ := ParseMigProfiles(got.String()); !reflect.DeepEqual(again, got) {
			t.Errorf("%q does not round-trip: %q", tc.in, got.String())
		}
	}
}

// TestBuildMigProfileChoice: only the chosen profiles' placements are
// published, with the same counters as when all are (sized for every
// profile, so they never refuse what the hardware accepts); none, or a
// choice the GPU has nothing of, publishes whole GPUs without counters.
func TestBuildMigProfileChoice(t *testing.T) {
	devices := func(choice MigProfiles) (names []string, counterSets int) {
		t.Helper()
		res, err := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs, MigProfiles: choice})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Pools["node-a"].Slices {
			counterSets += len(s.SharedCounters)
			for _, d := range s.Devices {
				if !strings.HasSuffix(d.Name, "-monitor") {
					names = append(names, d.Name)
				}
			}
		}
		return names, counterSets
	}
	// Two whole GPUs, the spare's placements (GPU 1's) and counter set.
	all, allSets := devices(MigProfiles{})
	if len(all) != 2+16 || allSets != 1 {
		t.Fatalf("all profiles: %d devices, %d counter sets", len(all), allSets)
	}
	some, someSets := devices(MigProfiles{Only: []string{"3g.40gb", "7g.80gb"}})
	if someSets != 1 || len(some) != 2+2 {
		t.Errorf("3g.40gb only (7g.80gb is not in the table): %v, %d counter sets", some, someSets)
	}
	for _, n := range some {
		if strings.Contains(n, "-mig-") && !strings.Contains(n, "-mig-3g40gb-") {
			t.Errorf("published %s", n)
		}
	}
	for _, choice := range []MigProfiles{{None: true}, {Only: []string{"7g.80gb"}}} {
		if names, sets := devices(choice); len(names) != 2 || sets != 0 {
			t.Errorf("%s: %v, %d counter sets; want the 2 whole GPUs only", choice, names, sets)
		}
	}

	// The same counter set whatever is published.
	full, _ := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	one, _ := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs, MigProfiles: MigProfiles{Only: []string{"1g.10gb"}}})
	fullSet, oneSet := full.Pools["node-a"].Slices[1].SharedCounters[0], one.Pools["node-a"].Slices[1].SharedCounters[0]
	delete(fullSet.Counters, InstancesCounter("1g.10gb+me")) // +me is not published
	if !reflect.DeepEqual(fullSet, oneSet) {
		t.Errorf("counters differ with one profile published:\n%v\n%v", oneSet, fullSet)
	}
}
