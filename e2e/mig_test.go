//go:build e2e

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/gpu"
)

const (
	migProfile  = "1g.10gb"
	migClass    = "mig-1g.10gb.gpudra.io"  // deviceclasses/mig-profiles.yaml
	migResource = "nvidia.com/mig-1g.10gb" // its extendedResourceName
)

// fakeMigInstances reads the fake backend's state file on the node through
// the inspector pod and returns, per GPU, the placement starts of its GPU
// instances: the MIG instances that exist on the "hardware".
func (e *env) fakeMigInstances(ctx context.Context, t *testing.T) map[string][]uint32 {
	t.Helper()
	out, err := e.kubectlRun(ctx, "-n", testNS, "exec", inspectorPod, "--", "cat", "/host/fake/nvmlfake-state.json")
	if err != nil && strings.Contains(err.Error(), "No such file") {
		return map[string][]uint32{} // nothing ever changed on the fake GPUs
	}
	if err != nil {
		t.Fatalf("read the fake state on the node: %v", err)
	}
	var st struct {
		GPUs map[string]struct {
			GpuInstances []struct {
				Start uint32 `json:"start"`
			} `json:"gpuInstances"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("fake state on the node: %v", err)
	}
	res := map[string][]uint32{}
	for id, g := range st.GPUs {
		for _, gi := range g.GpuInstances {
			res[id] = append(res[id], gi.Start)
		}
	}
	return res
}

func countInstances(m map[string][]uint32) int {
	n := 0
	for _, l := range m {
		n += len(l)
	}
	return n
}

// waitInstances waits until the node has want MIG instances in all.
func (e *env) waitInstances(ctx context.Context, t *testing.T, want int, why string) {
	t.Helper()
	var got map[string][]uint32
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got = e.fakeMigInstances(ctx, t)
		return countInstances(got) == want, nil
	}); err != nil {
		t.Errorf("%s: the node has MIG instances %v, want %d in all", why, got, want)
	}
}

// assertSeesMIG checks that the container sees exactly one MIG device and no
// whole GPU, and returns its MIG UUID and the parent minor it is on.
func assertSeesMIG(t *testing.T, pod string, s seen) (string, string) {
	t.Helper()
	if g := s.fakeGPUs(); len(g) != 0 {
		t.Errorf("pod %s sees whole GPUs %v, want only a MIG device", pod, sortedMap(g))
	}
	var migs []string
	minor, uuid := "", ""
	for k, v := range s.env {
		if rest, ok := strings.CutPrefix(k, "GPUDRA_FAKE_MIG_"); ok {
			migs = append(migs, k+"="+v)
			uuid = v
			minor, _, _ = strings.Cut(rest, "_")
			if !strings.HasPrefix(v, "MIG-") {
				t.Errorf("pod %s: %s=%s, want a MIG-… UUID", pod, k, v)
			}
		}
	}
	if len(migs) != 1 {
		t.Fatalf("pod %s sees MIG devices %v, want one", pod, migs)
	}
	if !contains(s.devices, "nvidia"+minor) {
		t.Errorf("pod %s: /dev has %v, lacks its MIG device's parent nvidia%s", pod, s.devices, minor)
	}
	return uuid, minor
}

// migPartition: a claim for one 1g.10gb partition of the per-profile class
// gets a MIG instance created at prepare; the container sees its MIG UUID;
// the instance is destroyed when the pod and its claim are gone.
func (e *env) migPartition(ctx context.Context, t *testing.T) {
	before := countInstances(e.fakeMigInstances(ctx, t))
	spec := e.gpuRequest(1)
	spec.Devices.Requests[0].Exactly.DeviceClassName = migClass
	e.createTemplate(ctx, t, "mig-1g", spec)
	e.startPod(ctx, t, e.gpuPod("mig-1g", claimRef{name: "gpu", template: "mig-1g"}))
	defer e.deletePods(ctx, t, "mig-1g")
	claim := e.podClaims(ctx, t, "mig-1g")["gpu"]
	devs := e.allocated(ctx, t, claim)
	if len(devs) != 1 {
		t.Fatalf("claim %s got %d devices, want 1", claim.Name, len(devs))
	}
	d := devs[0]
	if ptr.Deref(d.attrs["type"].StringValue, "") != "mig" || ptr.Deref(d.attrs["profile"].StringValue, "") != migProfile {
		t.Errorf("allocated %s: type %q, profile %q; want mig %s", d.name, ptr.Deref(d.attrs["type"].StringValue, ""), ptr.Deref(d.attrs["profile"].StringValue, ""), migProfile)
	}
	uuid, minor := assertSeesMIG(t, "mig-1g", e.whatPodSees(ctx, t, "mig-1g"))
	// The device name says where the partition is: gpu-<minor>-mig-<profile>-<start>.
	name, ok := gpu.ParseDeviceName(d.name)
	if !ok || !name.MIG {
		t.Fatalf("allocated %s: not a MIG device name", d.name)
	}
	if want := fmt.Sprint(name.Minor); minor != want {
		t.Errorf("pod mig-1g sees a MIG device on GPU %s, allocated %s is on GPU %s", minor, d.name, want)
	}
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 1 {
		t.Errorf("CDI specs for claim %s on the node: %v, want one", claim.UID, specs)
	}
	inst := e.fakeMigInstances(ctx, t)
	t.Logf("claim %s: device %s, container sees %s; MIG instances on the node: %v", claim.Name, d.name, uuid, inst)
	if countInstances(inst) != before+1 {
		t.Errorf("the node has MIG instances %v with the pod running, want %d in all", inst, before+1)
	}
	start := uint32(name.Start)
	// The fake's state is keyed by GPU UUID.
	if parent := ptr.Deref(d.attrs["parentUUID"].StringValue, ""); !containsStart(inst[parent], start) {
		t.Errorf("GPU %s has instances at %v, none at the allocated placement %d", parent, inst[parent], start)
	}

	e.deletePods(ctx, t, "mig-1g")
	e.waitClaimGone(ctx, t, claim.Name)
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 0 {
		t.Errorf("CDI specs of claim %s left after its pod is gone: %v", claim.UID, specs)
	}
	e.waitInstances(ctx, t, before, "after the pod and its claim are gone")
}

func containsStart(l []uint32, s uint32) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// migExtendedResource: a legacy pod spec asking for nvidia.com/mig-1g.10gb
// (the per-profile class's extendedResourceName) gets a MIG partition
// through the scheduler's extended-resource claim.
func (e *env) migExtendedResource(ctx context.Context, t *testing.T) {
	before := countInstances(e.fakeMigInstances(ctx, t))
	pod := e.gpuPod("mig-legacy")
	q := resource.MustParse("1")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{migResource: q}
	e.startPod(ctx, t, pod)
	defer e.deletePods(ctx, t, "mig-legacy")
	uuid, _ := assertSeesMIG(t, "mig-legacy", e.whatPodSees(ctx, t, "mig-legacy"))
	inst := e.fakeMigInstances(ctx, t)
	t.Logf("container sees %s; MIG instances on the node: %v", uuid, inst)
	if countInstances(inst) != before+1 {
		t.Errorf("the node has MIG instances %v with the pod running, want %d in all", inst, before+1)
	}
	e.deletePods(ctx, t, "mig-legacy")
	e.waitInstances(ctx, t, before, "after the pod is gone")
}
