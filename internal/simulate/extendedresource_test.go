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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWholeGPUClassMapsNvidiaGPU: the whole-GPU DeviceClass carries the
// device plugin's resource name, and the claim the scheduler builds for a
// pod asking for nvidia.com/gpu: 2 (two devices of that class) gets two
// whole GPUs.
func TestWholeGPUClassMapsNvidiaGPU(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	dc, err := c.Client.ResourceV1().DeviceClasses().Get(ctx, "gpu.gpudra.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dc.Spec.ExtendedResourceName == nil || *dc.Spec.ExtendedResourceName != "nvidia.com/gpu" {
		t.Fatalf("DeviceClass gpu.gpudra.io: extendedResourceName %v, want nvidia.com/gpu", dc.Spec.ExtendedResourceName)
	}
	res, err := createAndRun(ctx, t, c, gpuClaim("legacy", 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	got := allocatedDevices(res)
	if len(got) != 2 || strings.Contains(got[0], "-mig-") || strings.Contains(got[1], "-mig-") || got[0] == got[1] {
		t.Errorf("nvidia.com/gpu: 2 got %v, want two whole GPUs", got)
	}
}
