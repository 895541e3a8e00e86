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
	"sync"
	"testing"

	"github.com/gpudra/gpudra/internal/nodestate"
)

// TestTimeSliceRestoredHalfWay: the last time-sliced claim's unprepare
// sets the GPU back to the default time slice, then fails before it
// forgets the level it recorded. Before the kubelet retries, another
// claim asks for the same level on the GPU: the GPU must run at it, though
// the record says it is set already. Once both claims are gone, the GPU is
// back at the default.
func TestTimeSliceRestoredHalfWay(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	armed := false
	ctx, c := startHookedSharedCluster(t, nodestate.Hooks{AfterSharingStep: func(_ string, step string) error {
		mu.Lock()
		defer mu.Unlock()
		if armed && step == nodestate.StepTimeSliceRestored {
			armed = false
			return errors.New("simulated failure")
		}
		return nil
	}})
	uuid := uuidOf(t, c, "gpu-0")
	onGPU0 := func(name string) *PodResult {
		claim := shareClaim(name, "10Gi", "", tsShort)
		claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors("device.attributes['gpu.gpudra.io'].minor == 0")
		r, err := createAndRun(ctx, t, c, claim)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := onGPU0("a")
	short := policyOf(t, c, uuid).timeSlice
	if short == 0 {
		t.Fatal("a claim for the Short interval left the GPU at the default")
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := unprepareErr(ctx, t, c, a.Claims[0].Claim); err == nil {
		t.Fatal("the unprepare met no failure")
	}
	b := onGPU0("b")
	if got := policyOf(t, c, uuid).timeSlice; got != short {
		t.Errorf("GPU at time slice %d while claim b, prepared after a's restore failed half-way, asks for %d", got, short)
	}
	if err := unprepareErr(ctx, t, c, a.Claims[0].Claim); err != nil {
		t.Fatalf("the kubelet's retry of a's unprepare: %v", err)
	}
	if got := policyOf(t, c, uuid).timeSlice; got != short {
		t.Errorf("GPU at time slice %d after a went, while b asks for %d", got, short)
	}
	stopPod(ctx, t, c, b)
	if got := policyOf(t, c, uuid).timeSlice; got != 0 {
		t.Errorf("GPU at time slice %d after the last claim went, want the default", got)
	}
}
