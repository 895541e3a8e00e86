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

package check

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestClusterState: with a live cluster's classes and allocated claims
// (gpudra check --cluster), a claim is checked against what is free right
// now, and only the cluster's classes are known.
func TestClusterState(t *testing.T) {
	in := &scheduler.Manifests{}
	if err := in.Add("claims.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: eight, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.gpudra.io, allocationMode: ExactCount, count: 8}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mig, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: mig.gpudra.io}
`)); err != nil {
		t.Fatal(err)
	}
	classes, err := builtinClasses("gpu.gpudra.io")
	if err != nil {
		t.Fatal(err)
	}
	var gpuClass *resourceapi.DeviceClass
	for _, c := range classes {
		if dc := c.Obj.(*resourceapi.DeviceClass); dc.Name == "gpu.gpudra.io" {
			gpuClass = dc
		}
	}
	held := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "one"}}
	held.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.gpudra.io", Pool: "node-1", Device: "gpu-3"},
	}}}
	opts := onProfile(t, "dgx-h100", 1, Options{Inputs: in, ClusterClasses: []*resourceapi.DeviceClass{gpuClass}})
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(rep *Report, name string) ClaimInfo {
		for _, c := range rep.Claims {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no claim %s in %+v", name, rep.Claims)
		return ClaimInfo{}
	}
	if c := claim(rep, "default/eight"); c.Allocation == nil {
		t.Errorf("eight GPUs on a free node: %v", c.Unsatisfiable)
	}
	// mig.gpudra.io is not among the cluster's classes.
	if c := claim(rep, "default/mig"); c.Allocation != nil {
		t.Errorf("a claim of a class the cluster does not have was allocated")
	}
	found := false
	for _, f := range rep.Findings {
		found = found || strings.Contains(f.Message, "mig.gpudra.io")
	}
	if !found {
		t.Errorf("no finding names the missing class mig.gpudra.io: %+v", rep.Findings)
	}

	opts.Held = []*resourceapi.ResourceClaim{held}
	if rep, err = Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if c := claim(rep, "default/eight"); c.Allocation != nil || len(c.Unsatisfiable) == 0 {
		t.Errorf("eight GPUs on a node where team/one holds gpu-3: allocated %+v", c.Allocation)
	}
}

// TestClusterGpudraClassesNoPartitions: under --cluster, gpudra's own
// DeviceClasses (the chart's) that match nothing because no node
// publishes MIG placements at that moment (fleet mode: spares on a few
// nodes, none just now) are not errors themselves; the claim that uses
// one says why it waits.
func TestClusterGpudraClassesNoPartitions(t *testing.T) {
	in := &scheduler.Manifests{}
	if err := in.Add("claim.yaml", []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: slice, namespace: default}
spec:
  devices:
    requests:
    - {name: mig, exactly: {deviceClassName: mig-1g.10gb.gpudra.io}}
`)); err != nil {
		t.Fatal(err)
	}
	builtin, err := builtinClasses("gpu.gpudra.io")
	if err != nil {
		t.Fatal(err)
	}
	var classes []*resourceapi.DeviceClass
	for _, c := range builtin {
		classes = append(classes, c.Obj.(*resourceapi.DeviceClass))
	}
	wholeOnly := fakePoolInventory(t, "dgx-h100", 2, fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(0)})
	rep, err := Run(context.Background(), Options{Inputs: in, Slices: wholeOnly, ClusterClasses: classes})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Severity == SeverityError && strings.HasPrefix(f.Object, "DeviceClass ") {
			t.Errorf("gpudra's own class is an error: %s %s: %s", f.Kind, f.Object, f.Message)
		}
	}
	if c := rep.Claims[0]; c.Allocation != nil || !strings.Contains(strings.Join(c.Unsatisfiable, "\n"), "migSpareGPUs") {
		t.Errorf("the MIG claim on nodes without placements does not name the spares: %+v", c)
	}
}
