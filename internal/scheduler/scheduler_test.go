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

package scheduler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

const driver = "gpu.example.com"

// inventory has nodes with the given numbers of devices, each device of
// type gpu.
func inventory(devicesPerNode ...int) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for i, n := range devicesPerNode {
		node := fmt.Sprintf("node-%d", i+1)
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				NodeName: &node,
				Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			},
		}
		for d := range n {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
				Name:       fmt.Sprintf("gpu-%d", d),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: new("gpu")}},
			})
		}
		out = append(out, s)
	}
	return out
}

func class(name string, extended string) *resourceapi.DeviceClass {
	dc := gpudratest.Class(name, "device.driver == '"+driver+"'")
	if extended != "" {
		dc.Spec.ExtendedResourceName = &extended
	}
	return dc
}

func claim(name string, count int64) *resourceapi.ResourceClaim {
	c := gpudratest.Claim("default", name, gpudratest.Request("gpu", "gpu", count))
	DefaultClaimSpec(&c.Spec)
	return c
}

func newScheduler(t *testing.T, version string, slices []*resourceapi.ResourceSlice, rules ...*resourceapi.DeviceTaintRule) *Scheduler {
	t.Helper()
	f, err := FeaturesFor(version)
	if err != nil {
		t.Fatal(err)
	}
	return New(f, NewClasses([]*resourceapi.DeviceClass{class("gpu", "example.com/gpu")}), slices, rules)
}

// A pod's claims are allocated together: two one-device claims do not fit
// on node-1 (one device) together, so both go to node-2, where allocating
// them one at a time would have put the first on node-1.
func TestSchedulePodClaimsTogether(t *testing.T) {
	s := newScheduler(t, "1.37", inventory(1, 2))
	place, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1), claim("b", 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if place.Node.Name != "node-2" || place.Results[0].Devices.Results[0].Device == place.Results[1].Devices.Results[0].Device {
		t.Errorf("placed on %s: %+v", place.Node.Name, place.Results)
	}
	// A class that does not exist leaves the pod unschedulable, as the
	// scheduler's PreFilter does, rather than failing the allocator.
	other := claim("other", 1)
	other.Spec.Devices.Requests[0].Exactly.DeviceClassName = "gpu.nvidia.com"
	if _, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{other}, nil); !errors.Is(err, ErrUnschedulable) || !strings.Contains(err.Error(), "device class gpu.nvidia.com does not exist") {
		t.Errorf("missing class: %v", err)
	}
	// Three devices are nowhere.
	if _, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("c", 3)}, nil); !errors.Is(err, ErrUnschedulable) {
		t.Errorf("three devices: %v, want ErrUnschedulable", err)
	}
}

// A claim allocated already (shared with a running pod) pins the pod to
// its node, and what the state holds is not handed out again.
func TestScheduleSharedClaimAndState(t *testing.T) {
	s := newScheduler(t, "1.37", inventory(2, 2))
	state := NewState()
	shared := claim("shared", 1)
	place, err := s.Schedule(context.Background(), state, []*resourceapi.ResourceClaim{shared}, func(n *v1.Node) bool { return n.Name == "node-2" })
	if err != nil || place.Node.Name != "node-2" {
		t.Fatalf("candidate node-2 only: %v, %+v", err, place)
	}
	shared.Status.Allocation = place.Results[0]
	state.Add("default/shared", place.Results[0])
	if h := state.Holders(devID("node-2", place.Results[0].Devices.Results[0].Device)); !slices.Equal(h, []string{"default/shared"}) {
		t.Errorf("holders: %q", h)
	}
	place, err = s.Schedule(context.Background(), state, []*resourceapi.ResourceClaim{shared, claim("more", 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if place.Node.Name != "node-2" || place.Results[0] != nil || place.Results[1] == nil {
		t.Fatalf("want node-2 with only the new claim allocated, got %s %+v", place.Node.Name, place.Results)
	}
	if got, held := place.Results[1].Devices.Results[0].Device, shared.Status.Allocation.Devices.Results[0].Device; got == held {
		t.Errorf("the held device %s was allocated again", held)
	}
	// Two more on node-2 do not fit next to the held one.
	if _, err := s.Schedule(context.Background(), state, []*resourceapi.ResourceClaim{shared, claim("two", 2)}, nil); !errors.Is(err, ErrUnschedulable) {
		t.Errorf("two more next to the shared claim: %v", err)
	}
}

// DeviceTaintRules taint what they select when the version enables them
// (1.37); a tainted device is not allocated without a toleration.
func TestTaintRules(t *testing.T) {
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	rule.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{Pool: new("node-1")}
	rule.Spec.Taint = resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	for _, tt := range []struct {
		version string
		node    string
	}{{"1.36", "node-1"}, {"1.37", "node-2"}} {
		s := newScheduler(t, tt.version, inventory(1, 1), rule)
		place, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1)}, nil)
		if err != nil || place.Node.Name != tt.node {
			t.Errorf("%s: %v, placed on %v, want %s", tt.version, err, place, tt.node)
		}
	}
	none := &resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{Taint: rule.Spec.Taint}}
	if got := ApplyTaintRules(inventory(1), []*resourceapi.DeviceTaintRule{none}); len(got[0].Spec.Devices[0].Taints) != 0 {
		t.Errorf("a rule without a selector tainted a device")
	}
}

// TestNewOver: a scheduler over an inventory kept elsewhere, asked for
// one node's slices at a time, places as one over the whole inventory does
// (the claims together, taint rules applied) and never reads another
// node's slices for a node.
func TestNewOver(t *testing.T) {
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	rule.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{Pool: new("node-2")}
	rule.Spec.Taint = resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	inv := inventory(1, 2, 2)
	byNode := map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range inv {
		byNode[*sl.Spec.NodeName] = append(byNode[*sl.Spec.NodeName], sl)
	}
	var asked []string
	f, err := FeaturesFor("1.37")
	if err != nil {
		t.Fatal(err)
	}
	s := NewOver(f, NewClasses([]*resourceapi.DeviceClass{class("gpu", "")}), []string{"node-3", "node-1", "node-2"},
		func(node string) []*resourceapi.ResourceSlice { asked = append(asked, node); return byNode[node] },
		[]*resourceapi.DeviceTaintRule{rule})
	if got := []string{s.Nodes()[0].Name, s.Nodes()[1].Name, s.Nodes()[2].Name}; !slices.Equal(got, []string{"node-1", "node-2", "node-3"}) {
		t.Fatalf("nodes %v, want them in natural order", got)
	}
	// Two claims together fit neither node-1 (one device) nor node-2
	// (tainted): node-3.
	place, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1), claim("b", 1)}, nil)
	if err != nil || place.Node.Name != "node-3" {
		t.Fatalf("placed on %v (%v), want node-3", place, err)
	}
	if !slices.Equal(asked, []string{"node-1", "node-2", "node-3"}) {
		t.Errorf("slices asked for %v, want each node's once, in order", asked)
	}
	whole, err := newScheduler(t, "1.37", inv, rule).Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1), claim("b", 1)}, nil)
	if err != nil || whole.Node.Name != place.Node.Name {
		t.Errorf("over the whole inventory: %v (%v), over one node at a time: %s", whole, err, place.Node.Name)
	}
}

// The special claim for extended resources: one request per container and
// resource, named as the scheduler names them; a plain init container
// reuses a later container's request when it is big enough; the implicit
// deviceclass.resource.kubernetes.io/<class> name works; unmapped names
// and versions without DRAExtendedResource are told apart.
func TestExtendedResources(t *testing.T) {
	limits := func(kv ...any) v1.ResourceRequirements {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i].(string))] = resource.MustParse(kv[i+1].(string))
		}
		return v1.ResourceRequirements{Limits: l}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", Resources: limits("example.com/gpu", "1")}},
		Containers: []v1.Container{
			{Name: "a", Resources: limits("cpu", "1", "example.com/gpu", "2")},
			{Name: "b", Resources: limits("deviceclass.resource.kubernetes.io/gpu", "1", "vendor.com/fpga", "1")},
		},
	}}
	DefaultPod(pod)
	ext := newScheduler(t, "1.37", inventory(4)).ExtendedResources(pod)
	if ext.Claim == nil {
		t.Fatal("no claim")
	}
	var got []string
	for _, r := range ext.Claim.Spec.Devices.Requests {
		got = append(got, fmt.Sprintf("%s:%s×%d", r.Name, r.Exactly.DeviceClassName, r.Exactly.Count))
	}
	// Container a is index 1 (after the init container); example.com/gpu
	// sorts after cpu. b's implicit name sorts first.
	want := []string{"container-1-request-1:gpu×2", "container-2-request-0:gpu×1"}
	if !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	var maps []string
	for _, m := range ext.Mappings {
		maps = append(maps, m.ContainerName+"/"+m.ResourceName+"→"+m.RequestName)
	}
	wantMaps := []string{"b/deviceclass.resource.kubernetes.io/gpu→container-2-request-0", "a/example.com/gpu→container-1-request-1", "init/example.com/gpu→container-1-request-1"}
	if !slices.Equal(maps, wantMaps) {
		t.Errorf("mappings %v, want %v", maps, wantMaps)
	}
	if !slices.Equal(ext.Unbacked, []v1.ResourceName{"vendor.com/fpga"}) || ext.Claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		t.Errorf("unbacked %v, annotations %v", ext.Unbacked, ext.Claim.Annotations)
	}
	old := newScheduler(t, "1.35", inventory(4)).ExtendedResources(pod)
	if old.Claim != nil || len(old.NotEnabled) != 2 {
		t.Errorf("1.35: claim %v, not enabled %v", old.Claim, old.NotEnabled)
	}
	// The claim is allocated like any other.
	s := newScheduler(t, "1.37", inventory(4))
	if _, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{ext.Claim}, nil); err != nil {
		t.Errorf("allocate the extended resources' claim: %v", err)
	}
}

func TestFeaturesFor(t *testing.T) {
	for _, tt := range []struct {
		version                             string
		partitionable, extended, taintRules bool
	}{
		{"1.34", false, false, false}, {"v1.35", false, false, false}, {"1.36", true, true, false}, {"1.37", true, true, true},
	} {
		f, err := FeaturesFor(tt.version)
		if err != nil {
			t.Fatal(err)
		}
		if f.Allocator.PartitionableDevices != tt.partitionable || f.ExtendedResource != tt.extended || f.DeviceTaintRules != tt.taintRules || !f.Allocator.PrioritizedList {
			t.Errorf("%s: %+v", tt.version, f)
		}
	}
	if _, err := FeaturesFor("1.29"); err == nil {
		t.Error("1.29 accepted")
	}
}

func TestDefaultClaimSpec(t *testing.T) {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: "plain", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", Tolerations: []resourceapi.DeviceToleration{{Key: "k"}}}},
		{Name: "all", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: resourceapi.DeviceAllocationModeAll}},
		{Name: "three", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", Count: 3}},
		{Name: "first", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: "c"}}},
	}}}
	DefaultClaimSpec(&spec)
	r := spec.Devices.Requests
	if r[0].Exactly.AllocationMode != resourceapi.DeviceAllocationModeExactCount || r[0].Exactly.Count != 1 || r[0].Exactly.Tolerations[0].Operator != resourceapi.DeviceTolerationOpEqual {
		t.Errorf("plain request defaulted to %+v", r[0].Exactly)
	}
	if r[1].Exactly.Count != 0 {
		t.Errorf("All request got count %d, want none", r[1].Exactly.Count)
	}
	if r[2].Exactly.Count != 3 || r[2].Exactly.AllocationMode != resourceapi.DeviceAllocationModeExactCount {
		t.Errorf("count 3 request became %s/%d", r[2].Exactly.AllocationMode, r[2].Exactly.Count)
	}
	if sub := r[3].FirstAvailable[0]; sub.AllocationMode != resourceapi.DeviceAllocationModeExactCount || sub.Count != 1 {
		t.Errorf("subrequest defaulted to %s/%d, want ExactCount/1", sub.AllocationMode, sub.Count)
	}
}

func devID(pool, device string) structured.DeviceID {
	return structured.MakeDeviceID(driver, pool, device)
}

// TestAllocatorEdited: the allocator over a node's slices as edit makes
// them, the others and the taint rules as they were; the scheduler's
// own slices are untouched.
func TestAllocatorEdited(t *testing.T) {
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	rule.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{Pool: new("node-2")}
	rule.Spec.Taint = resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	inv := inventory(1, 2)
	byNode := map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range inv {
		byNode[*sl.Spec.NodeName] = append(byNode[*sl.Spec.NodeName], sl)
	}
	f, err := FeaturesFor("1.37")
	if err != nil {
		t.Fatal(err)
	}
	s := NewOver(f, NewClasses([]*resourceapi.DeviceClass{class("gpu", "")}), []string{"node-1", "node-2"},
		func(node string) []*resourceapi.ResourceSlice { return byNode[node] }, []*resourceapi.DeviceTaintRule{rule})
	// One more device on the node's slices.
	more := func(local []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
		var out []*resourceapi.ResourceSlice
		for _, sl := range local {
			c := sl.DeepCopy()
			d := *c.Spec.Devices[0].DeepCopy()
			d.Name += "-more"
			c.Spec.Devices = append(c.Spec.Devices, d)
			out = append(out, c)
		}
		return out
	}
	fits := func(node string, edit func([]*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice) bool {
		t.Helper()
		alloc, err := s.AllocatorEdited(context.Background(), NewState(), node, edit)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Filter(context.Background(), alloc, NodesNamed([]string{node})[0], []*resourceapi.ResourceClaim{claim("a", 1), claim("b", 1)})
		return err == nil && len(res) == 2
	}
	same := func(local []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice { return local }
	if fits("node-1", same) {
		t.Error("two claims fit node-1's one device")
	}
	if !fits("node-1", more) {
		t.Error("two claims do not fit node-1 with a device more")
	}
	if fits("node-2", more) {
		t.Error("node-2's edited devices escaped the taint rule")
	}
	if n := len(byNode["node-1"][0].Spec.Devices); n != 1 {
		t.Errorf("node-1's slice changed: %d devices", n)
	}
}

// The allocator on a node reads only that node's slices and those of no
// one node, yet it must still see a pool whole: a pool whose slices lie
// on two nodes is complete on each (its devices allocate), and one that
// lacks a slice is not (nothing allocates from it), as over the whole
// inventory.
func TestAllocatorSeesPoolsWhole(t *testing.T) {
	split := func(count int64) []*resourceapi.ResourceSlice {
		slices := inventory(1, 1)
		for _, sl := range slices {
			sl.Spec.Pool = resourceapi.ResourcePool{Name: "split", Generation: 1, ResourceSliceCount: count}
		}
		slices[1].Spec.Devices[0].Name = "gpu-b"
		return slices
	}
	s := newScheduler(t, "1.37", split(2))
	place, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1)}, nil)
	if err != nil {
		t.Fatalf("a pool split over two nodes: %v", err)
	}
	if got := place.Results[0].Devices.Results[0].Device; place.Node.Name != "node-1" || got != "gpu-0" {
		t.Errorf("placed on %s, device %s; want node-1, gpu-0", place.Node.Name, got)
	}
	s = newScheduler(t, "1.37", split(3))
	if _, err := s.Schedule(context.Background(), NewState(), []*resourceapi.ResourceClaim{claim("a", 1)}, nil); !errors.Is(err, ErrUnschedulable) {
		t.Errorf("a pool that lacks a slice: %v, want ErrUnschedulable", err)
	}
}

// Replacing a node's slices updates the per-node index in place where its
// pools lie on that node alone, and rebuilds it where not: either way it
// is the index of the inventory as it is now.
func TestReplaceNodeSlicesKeepsIndex(t *testing.T) {
	split := inventory(1, 1)
	for _, sl := range split {
		sl.Spec.Pool = resourceapi.ResourcePool{Name: "split", Generation: 1, ResourceSliceCount: 2}
	}
	for name, inv := range map[string][]*resourceapi.ResourceSlice{
		"one pool per node":   inventory(1, 2, 3),
		"a pool on two nodes": append(split, inventory(0, 0, 3)[2]),
	} {
		s := newScheduler(t, "1.37", inv)
		node := "node-2"
		again := inventory(0, 4)[1:]
		again[0].Spec.Pool.Generation = 2
		s.ReplaceNodeSlices(node, again)
		if want := newSliceIndex(s.Slices()); !reflect.DeepEqual(s.index, want) {
			t.Errorf("%s: index after the replace\n%+v\nwant\n%+v", name, s.index, want)
		}
		s.ReplaceNodeSlices(node, nil)
		if want := newSliceIndex(s.Slices()); !reflect.DeepEqual(s.index, want) {
			t.Errorf("%s: index after removing the node's slices\n%+v\nwant\n%+v", name, s.index, want)
		}
	}
}
