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

package nodestate

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

func TestGPUsInUse(t *testing.T) {
	n := newNode(t, 4)
	s := n.start()
	mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: "whole", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}}))
	mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: "monitor", results: []resourceapi.DeviceRequestAllocationResult{adminResult("gpu", 2)}}))
	// A MIG partition's record, as a MIG prepare leaves it (the test
	// hardware has no MIG).
	mig := record("mig", 3)
	mig.Devices[0].Mig = &checkpoint.MigDevice{Profile: "1g.10gb", ProfileID: 19, PlacementStart: 0, PlacementSize: 1}
	if err := s.putClaim(mig.UID, mig); err != nil {
		t.Fatal(err)
	}
	want := map[string]gpu.Use{gpuUUID(0): gpu.UsedWhole, gpuUUID(3): gpu.UsedByMIG}
	if got := s.GPUsInUse(); !reflect.DeepEqual(got, want) {
		t.Errorf("GPUsInUse = %v, want %v (admin access holds nothing)", got, want)
	}
	if err := s.Unprepare(n.ctx, ClaimRef{UID: uidOf("whole"), Namespace: "default", Name: "whole"}); err != nil {
		t.Fatal(err)
	}
	if got := s.GPUsInUse(); !reflect.DeepEqual(got, map[string]gpu.Use{gpuUUID(3): gpu.UsedByMIG}) {
		t.Errorf("after unprepare GPUsInUse = %v", got)
	}
}
