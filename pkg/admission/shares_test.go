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
// pkg/simulate TestTwoSharesOfOneGPUInOneClaim) and gpudra check allocates
// it (testdata/corpus/two-shares-one-claim.yaml in pkg/check): the three
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
