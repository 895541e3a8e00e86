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

package simulate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestMigProperty runs random sequences of claims and releases for random
// profile mixes against the real allocator and the fake NVML (which, like
// the driver, refuses overlapping or over-capacity instances). After every
// step:
//
//   - every allocation the allocator made was prepared: its instances
//     could be created where the allocator placed them;
//   - the hardware holds exactly the instances of the claims that are
//     prepared, and MIG mode is on exactly where one is (or where an admin
//     set it): a release leaves no trace.
//
// A failure names the step; the seeds are fixed, so it replays.
func TestMigProperty(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		seeds = seeds[:2]
	}
	// Two-GPU nodes fill up within a few claims, which is where placement
	// mistakes show.
	var profiles []string
	for _, m := range []string{"h100-sxm5-80gb", "h200-sxm5-141gb", "b200-sxm-180gb", "a100-mig"} {
		profiles = append(profiles, filepath.Join("testdata", "profiles", "two-"+m+".yaml"))
	}
	for _, seed := range seeds {
		profile := profiles[int(seed-1)%len(profiles)]
		t.Run(fmt.Sprintf("seed=%d/%s", seed, strings.TrimSuffix(profile[strings.LastIndex(profile, "/")+1:], ".yaml")), func(t *testing.T) {
			runMigProperty(t, seed, profile, 50)
		})
	}
}

func runMigProperty(t *testing.T, seed uint64, profile string, steps int) {
	ctx, c := startCluster(t, profile)
	rng := rand.New(rand.NewPCG(seed, seed*7919))

	// The profile mix: a random non-empty subset of the node's profiles
	// (the per-profile classes cover those without "+me"; those go
	// through mig.gpudra.io with a profile selector).
	var all []string
	for _, g := range c.Driver.Node().GPUs {
		if g.MIG != nil {
			for _, p := range g.MIG.Profiles {
				all = append(all, p.Name)
			}
			break
		}
	}
	var mix []string
	for _, p := range all {
		if rng.IntN(2) == 0 {
			mix = append(mix, p)
		}
	}
	if len(mix) == 0 {
		mix = all[:1]
	}
	t.Logf("seed %d, profile %s, mix %v", seed, profile, mix)

	adminMigOn := map[string]bool{}
	for _, line := range instancesOn(hardware(t, c)) {
		adminMigOn[line] = true
	}

	type held struct {
		res   *PodResult
		claim *resourceapi.ResourceClaim
	}
	var active []held
	allocated, refused := 0, 0
	for step := range steps {
		if len(active) == 0 || rng.IntN(10) < 6 {
			name := fmt.Sprintf("c%d", step)
			var claim *resourceapi.ResourceClaim
			switch k := rng.IntN(10); {
			case k == 0:
				claim = gpuClaim(name, 1, "")
			case k < 7:
				claim = migClaim(name, false, "")
				claim.Spec.Devices.Requests[0] = profileRequest("mig0", mix[rng.IntN(len(mix))])
			default:
				claim = migClaim(name, true, "", "")
				for i := range claim.Spec.Devices.Requests {
					claim.Spec.Devices.Requests[i] = profileRequest(fmt.Sprintf("mig%d", i), mix[rng.IntN(len(mix))])
				}
			}
			res, err := runClaim(ctx, t, c, claim)
			switch {
			case errors.Is(err, ErrUnschedulable):
				refused++
				if err := c.Client.ResourceV1().ResourceClaims("default").Delete(ctx, name, metav1DeleteOptions); err != nil {
					t.Fatal(err)
				}
			case err != nil:
				t.Fatalf("step %d: the allocator placed %s but the plugin could not prepare it: %v", step, describeClaim(claim), err)
			default:
				allocated++
				active = append(active, held{res, res.Claims[0].Claim})
			}
		} else {
			i := rng.IntN(len(active))
			h := active[i]
			active = append(active[:i], active[i+1:]...)
			if err := c.StopPod(ctx, h.res); err != nil {
				t.Fatalf("step %d: unprepare: %v", step, err)
			}
			if err := c.Client.ResourceV1().ResourceClaims("default").Delete(ctx, h.claim.Name, metav1DeleteOptions); err != nil {
				t.Fatal(err)
			}
		}
		var claims []*resourceapi.ResourceClaim
		for _, h := range active {
			claims = append(claims, h.claim)
		}
		want := expectedInstances(t, c, claims...)
		for line := range adminMigOn {
			if !contains(want, line) {
				want = append(want, line)
			}
		}
		sort.Strings(want)
		if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: hardware holds %v, want %v", step, got, want)
		}
	}
	for _, h := range active {
		if err := c.StopPod(ctx, h.res); err != nil {
			t.Fatal(err)
		}
	}
	var wantEnd []string
	for line := range adminMigOn {
		wantEnd = append(wantEnd, line)
	}
	sort.Strings(wantEnd)
	if got := instancesOn(hardware(t, c)); !reflect.DeepEqual(got, wantEnd) && !(len(got) == 0 && len(wantEnd) == 0) {
		t.Fatalf("after releasing everything the hardware holds %v, want %v", got, wantEnd)
	}
	assertNothingPrepared(t, c)
	if allocated == 0 || refused == 0 {
		t.Logf("note: %d allocated, %d refused", allocated, refused)
	}
	t.Logf("%d claims allocated and prepared, %d refused by the allocator", allocated, refused)
}

// profileRequest asks for one partition of exactly the profile.
func profileRequest(name, profile string) resourceapi.DeviceRequest {
	return migRequest(name, "", fmt.Sprintf("device.attributes['gpu.gpudra.io'].profile == '%s'", profile))
}

func describeClaim(claim *resourceapi.ResourceClaim) string {
	var parts []string
	for _, r := range claim.Spec.Devices.Requests {
		s := r.Exactly.DeviceClassName
		for _, sel := range r.Exactly.Selectors {
			s += " " + sel.CEL.Expression
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
