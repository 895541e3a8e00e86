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

package gpudratest

import "testing"

func TestBuilders(t *testing.T) {
	c := Allocate(WithUID(Claim("ns", "c", Request("gpu", "gpu.gpudra.io", 2, "device.driver == 'gpu.gpudra.io'")), "uid-1"),
		Result("gpu", "gpu.gpudra.io", "node-1", "gpu-0"))
	c.Spec.Devices.Config = append(c.Spec.Devices.Config, Opaque("gpu.gpudra.io", `{"kind":"GpuConfig"}`, "gpu"))
	r := c.Spec.Devices.Requests[0].Exactly
	if c.Namespace != "ns" || c.Name != "c" || c.UID != "uid-1" || r.DeviceClassName != "gpu.gpudra.io" || r.Count != 2 ||
		len(r.Selectors) != 1 || r.Selectors[0].CEL.Expression != "device.driver == 'gpu.gpudra.io'" {
		t.Errorf("claim %+v", c)
	}
	if res := c.Status.Allocation.Devices.Results; len(res) != 1 || res[0].Pool != "node-1" || res[0].Device != "gpu-0" {
		t.Errorf("allocation %+v", c.Status.Allocation)
	}
	if cfg := c.Spec.Devices.Config[0]; cfg.Requests[0] != "gpu" || string(cfg.Opaque.Parameters.Raw) != `{"kind":"GpuConfig"}` {
		t.Errorf("config %+v", cfg)
	}
	p := Pod("ns", "p", "a", "b")
	if len(p.Spec.ResourceClaims) != 2 || *p.Spec.ResourceClaims[1].ResourceClaimName != "b" || len(p.Spec.Containers[0].Resources.Claims) != 2 {
		t.Errorf("pod %+v", p.Spec)
	}
}
