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

package admission

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestTwoSharesOfOneGPUAdmitted: a claim whose two requests each ask for a
// share of a GPU's memory, under one MPS config, is admitted, as the
// kubelet plugin prepares it (one device with the sum of the shares,
// internal/simulate TestTwoSharesOfOneGPUInOneClaim) and gpudra check allocates
// it (testdata/corpus/two-shares-one-claim.yaml in internal/check): the three
// agree that such a claim works.
func TestTwoSharesOfOneGPUAdmitted(t *testing.T) {
	c := claim(opaque(driver, `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`))
	share := func(name, memory string) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "gpu.gpudra.io",
			Capacity:        &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}},
		}}
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{share("weights", "10Gi"), share("activations", "20Gi")}
	var ar struct {
		Request *request `json:"request"`
	}
	if err := json.Unmarshal(review(t, admissionv1.Create, c, nil), &ar); err != nil {
		t.Fatal(err)
	}
	resp, result := Validator{DriverName: driver}.review(context.Background(), ar.Request)
	if !resp.Allowed || result != Allowed {
		t.Fatalf("a claim of two shares under one MPS config: %s, %+v", result, resp.Result)
	}
}
