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

package claimplan

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// h100 is an H100 SXM5 80GB as the fake profile dgx-h100 models it (internal/nvmlfake: 81559 MiB, 132 SMs).
var h100 = gpu.GPU{Minor: 0, UUID: "GPU-0", MemoryBytes: 81559 << 20, Multiprocessors: 132}

func shareOfGPU(req, id, memory string) Device {
	u := types.UID(id)
	consumed := map[resourceapi.QualifiedName]resource.Quantity{}
	if memory != "" {
		consumed[CapacityMemory] = resource.MustParse(memory)
	}
	return Device{
		Result:   resourceapi.DeviceRequestAllocationResult{Request: req, Device: h100.DeviceName(), ShareID: &u, ConsumedCapacity: consumed},
		Requests: []string{req},
		Consumed: consumed,
		GPU:      h100,
		Config:   &configapi.GpuConfig{},
	}
}

// TestMergeShares: two shares of one GPU in one claim are one device for
// both requests with the sum of the shares; with different configs they
// are refused, saying how to fix the claim.
func TestMergeShares(t *testing.T) {
	merged, err := mergeShares([]Device{shareOfGPU("weights", "s1", "10Gi"), shareOfGPU("activations", "s2", "20Gi")})
	if err != nil {
		t.Fatal(err)
	}
	if len(merged) != 1 {
		t.Fatalf("%d devices, want the GPU once", len(merged))
	}
	if got := strings.Join(merged[0].Requests, ","); got != "weights,activations" {
		t.Errorf("requests %s, want weights,activations", got)
	}
	if mem, _ := merged[0].Share(); mem != 30<<30 {
		t.Errorf("share of %d bytes, want 30Gi", mem)
	}
	if h := merged[0].Held(); len(h.Requests) != 2 || h.ShareMemoryBytes != 30<<30 {
		t.Errorf("the record holds requests %v and %d bytes, want both requests and 30Gi", h.Requests, h.ShareMemoryBytes)
	}

	other := shareOfGPU("activations", "s2", "20Gi")
	other.Config = &configapi.GpuConfig{Sharing: &configapi.Sharing{Strategy: configapi.MPSStrategy}}
	_, err = mergeShares([]Device{shareOfGPU("weights", "s1", "10Gi"), other})
	if kindOf(err) != SharesDiffer || !strings.Contains(err.Error(), `requests "weights" and "activations" were given two shares of device gpu-0`) {
		t.Errorf("different configs: %v, want a %s refusal naming both requests", err, SharesDiffer)
	}
}

// TestCheckShares: a share the node never offered is refused.
func TestCheckShares(t *testing.T) {
	published := Options{SharesPublished: true}
	mig := shareOfGPU("a", "s", "10Gi")
	mig.Mig = &gpu.MigDevice{Parent: h100}
	for name, tc := range map[string]struct {
		opts Options
		p    Device
		want string // "" for none
	}{
		"a share that fits":       {published, shareOfGPU("a", "s", "30Gi"), ""},
		"all of the memory":       {published, shareOfGPU("a", "s", "81559Mi"), ""},
		"node publishes no share": {Options{}, shareOfGPU("a", "s", "10Gi"), "publishes its GPUs exclusive"},
		"of a MIG partition":      {published, mig, "MIG partitions are never shared"},
		"no memory":               {published, shareOfGPU("a", "s", ""), "without a share of its memory"},
		"zero":                    {published, shareOfGPU("a", "s", "0"), "below the smallest share"},
		"more than the GPU":       {published, shareOfGPU("a", "s", "1Ti"), "more than the GPU's"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkShares(tc.opts, []Device{tc.p})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (kindOf(err) != InvalidShare || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkShares = %v, want a %s refusal saying %q", err, InvalidShare, tc.want)
			}
		})
	}
}

// TestOverSubscribed: a share must fit beside what other claims hold.
func TestOverSubscribed(t *testing.T) {
	p := shareOfGPU("a", "s", "30Gi")
	if r := OverSubscribed(p, 40<<30, 0); r != nil {
		t.Errorf("30Gi beside 40Gi of 80GB refused: %v", r)
	}
	if r := OverSubscribed(p, 60<<30, 0); r == nil || r.Kind != ShareOverSubscribed || !strings.Contains(r.Msg, "does not fit") {
		t.Errorf("30Gi beside 60Gi of 80GB: %v, want a %s refusal", r, ShareOverSubscribed)
	}
	p.Consumed[CapacityMultiprocessors] = resource.MustParse("100")
	if r := OverSubscribed(p, 0, 40); r == nil || !strings.Contains(r.Msg, "multiprocessors does not fit") {
		t.Errorf("100 SMs beside 40 of 132: %v, want a refusal", r)
	}
	whole := shareOfGPU("a", "s", "30Gi")
	whole.Result.ShareID = nil
	if r := OverSubscribed(whole, 80<<30, 0); r != nil {
		t.Errorf("a device allocated whole is no share: %v", r)
	}
}
