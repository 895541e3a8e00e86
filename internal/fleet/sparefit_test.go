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

package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// spareFleet is n DGX H100 nodes in fleet mode, node-1 and node-2
// publishing a spare, each labelled with its hostname.
func spareFleet(t *testing.T, n int) Inputs {
	t.Helper()
	in := Inputs{DriverName: driver, Now: now, Classes: []*resourceapi.DeviceClass{gpuClass(), gpudratest.Class("mig.gpudra.io",
		fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'mig'", driver, driver))}}
	dir := t.TempDir()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		spares := 0
		if i <= 2 {
			spares = 1
		}
		sl, err := fakenodes.Node(context.Background(), "dgx-h100", name, driver, dir, fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(spares)})
		if err != nil {
			t.Fatal(err)
		}
		in.Slices = append(in.Slices, sl...)
		nd := node(name, true, true)
		nd.Labels = map[string]string{"kubernetes.io/hostname": name}
		in.Nodes = append(in.Nodes, nd)
	}
	return in
}

// pinned is a waiting pod that may go only to one node.
func pinned(name, claimName, nodeName string) *corev1.Pod {
	p := unscheduled(name, claimName)
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodeName}
	return p
}

// spareAssignment is what the controller's policy makes of a Stranding:
// migspares.Assign over the fleet's MIG view.
func spareAssignment(in Inputs, st Stranding, current migspares.Assignment, target int) migspares.Result {
	return assignWith(in, st, current, target, nil)
}

// assignWith is spareAssignment with what earlier calls gave waiting pods.
func assignWith(in Inputs, st Stranding, current migspares.Assignment, target int, given map[string]string) migspares.Result {
	view := Account(in).MIG
	var nodes []migspares.Node
	for _, name := range slices.Sorted(maps.Keys(view)) {
		v := view[name]
		n := migspares.Node{Name: name, Ready: v.Schedulable}
		for _, g := range v.GPUs {
			n.GPUs = append(n.GPUs, migspares.GPU{Whole: g.Whole, Partitioned: g.Partitioned, Unhealthy: g.Tainted, Published: g.Published})
		}
		nodes = append(nodes, n)
	}
	var waiting []migspares.Waiting
	for _, u := range st.Unplaced {
		waiting = append(waiting, migspares.Waiting{Pod: u.Pod, Nodes: u.Nodes, Gang: u.Gang})
	}
	return migspares.Assign(nodes, current, target, waiting, given)
}

// TestUnplacedOnlyWhereASpareHelps (issue 27, defect 3): waiting pods that
// no MIG spare can help (nine whole GPUs on an eight-GPU node, each pinned
// to its own node) are given no spare: the fleet keeps the target's 2,
// not one node per pod. A pod that a spare does help (a partition on a
// node that publishes none) is still given one there.
func TestUnplacedOnlyWhereASpareHelps(t *testing.T) {
	in := spareFleet(t, 16)
	for i := range 12 {
		c := fmt.Sprintf("nine-%d", i)
		in.Claims = append(in.Claims, want(c, 9, false))
		in.Pods = append(in.Pods, pinned("hopeless-"+fmt.Sprint(i), c, fmt.Sprintf("node-%d", i+5)))
	}
	current := migspares.Assignment{"node-1": 1, "node-2": 1}
	st, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unsatisfiable != 12 {
		t.Fatalf("%d unsatisfiable pods, want the 12 hopeless ones", st.Unsatisfiable)
	}
	for _, u := range st.Unplaced {
		if len(u.Nodes) > 0 {
			t.Errorf("%s may be helped by a spare on %v, but it asks for nine whole GPUs", u.Pod, u.Nodes)
		}
	}
	if got := spareAssignment(in, st, current, 2); len(got.Assignment) != 2 {
		t.Errorf("12 pods no spare helps: %d nodes assigned (%v), want the target's 2", len(got.Assignment), slices.Sorted(maps.Keys(got.Assignment)))
	}

	in.Claims = append(in.Claims, claim("ns", "mig", "mig.gpudra.io", time.Minute))
	in.Pods = append(in.Pods, pinned("helped", "mig", "node-3"))
	st, err = Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var helped []string
	for _, u := range st.Unplaced {
		if u.Pod == "ns/helped" {
			helped = u.Nodes
		}
	}
	if !slices.Equal(helped, []string{"node-3"}) {
		t.Errorf("the partition pod pinned to node-3 is helped by a spare on %v, want [node-3]", helped)
	}
	got := spareAssignment(in, st, current, 2)
	if names := slices.Sorted(maps.Keys(got.Assignment)); !slices.Equal(names, []string{"node-1", "node-2", "node-3"}) {
		t.Errorf("assigned %v, want node-1, node-2 and node-3 (the partition pod's)", names)
	}
}

// TestSpareCarriesItsNodesAttributes: the placements a spare would
// publish are copied from another node's GPU of the model, but carry the
// spare GPU's own attributes (slicebuilder.PartitionParentAttributes), as
// its plugin publishes them: a partition claim that asks for a newer
// driver is helped by a spare on the node that runs one (node-3), not on
// a node that runs the template's (node-4).
func TestSpareCarriesItsNodesAttributes(t *testing.T) {
	in := spareFleet(t, 4)
	for _, s := range in.Slices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName != "node-3" {
			continue
		}
		for _, d := range s.Spec.Devices {
			if _, ok := d.Attributes[slicebuilder.AttrDriverVersion]; ok {
				d.Attributes[slicebuilder.AttrDriverVersion] = resourceapi.DeviceAttribute{VersionValue: ptr.To("570.86.10")}
			}
		}
	}
	in.Classes = append(in.Classes, gpudratest.Class("mig-new-driver.gpudra.io",
		fmt.Sprintf("device.driver == '%[1]s' && device.attributes['%[1]s'].type == 'mig' && device.attributes['%[1]s'].driverVersion.isGreaterThan(semver('560.0.0'))", driver)))
	for _, n := range []string{"node-3", "node-4"} {
		in.Claims = append(in.Claims, claim("ns", "new-"+n, "mig-new-driver.gpudra.io", time.Minute))
		in.Pods = append(in.Pods, pinned("on-"+n, "new-"+n, n))
	}
	st, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	helped := map[string][]string{}
	for _, u := range st.Unplaced {
		helped[u.Pod] = u.Nodes
	}
	if got := helped["ns/on-node-3"]; !slices.Equal(got, []string{"node-3"}) {
		t.Errorf("the pod pinned to node-3 (driver 570) is helped by a spare on %v, want [node-3]", got)
	}
	if got := helped["ns/on-node-4"]; len(got) != 0 {
		t.Errorf("the pod pinned to node-4 (driver 550) is helped by a spare on %v, want nowhere", got)
	}
}

// TestSparesDoNotRatchet (issue 27, defect 3): four rounds of three
// waiting pods that no spare helps, each round pinned to other nodes and
// then deleted, left 14 of 16 nodes publishing placements (published
// spares are never withdrawn). Now the fleet keeps the target's 2.
func TestSparesDoNotRatchet(t *testing.T) {
	in := spareFleet(t, 16)
	dir := t.TempDir()
	// publish makes an assigned node publish its spare, as its plugin
	// does; it stays published (sticky).
	publish := func(a migspares.Assignment) {
		for name := range a {
			sl, err := fakenodes.Node(context.Background(), "dgx-h100", name, driver, dir, fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(1)})
			if err != nil {
				t.Fatal(err)
			}
			in.Slices = slices.DeleteFunc(in.Slices, func(s *resourceapi.ResourceSlice) bool { return *s.Spec.NodeName == name })
			in.Slices = append(in.Slices, sl...)
		}
	}
	current := migspares.Assignment{"node-1": 1, "node-2": 1}
	var given map[string]string
	for round := range 4 {
		in.Claims, in.Pods = nil, nil
		for i := range 3 {
			c := fmt.Sprintf("nine-%d-%d", round, i)
			in.Claims = append(in.Claims, want(c, 9, false))
			in.Pods = append(in.Pods, pinned(c, c, fmt.Sprintf("node-%d", 3+round*3+i)))
		}
		for range 2 { // the pods wait two recomputes, then are deleted
			st, err := Strand(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			res := assignWith(in, st, current, 2, given)
			current, given = res.Assignment, res.Given
			publish(current)
		}
		in.Claims, in.Pods = nil, nil
		st, err := Strand(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		res := assignWith(in, st, current, 2, given)
		current, given = res.Assignment, res.Given
	}
	publishing := 0
	for _, n := range Account(in).MIG {
		if slices.ContainsFunc(n.GPUs, func(g MIGGPU) bool { return g.Published }) {
			publishing++
		}
	}
	if publishing != 2 {
		t.Errorf("after four rounds of three deleted pods no spare helps, %d of 16 nodes publish placements, want the target's 2", publishing)
	}
}

// TestSpareHelpsAnyDevicePod: the allocator is skipped only for pods none
// of whose requests can take a placement (mayUsePlacement). Nine devices
// of a class that takes whole GPUs and partitions alike fit on no
// eight-GPU node now, and fit once it publishes a spare (seven whole
// GPUs and two of the spare's placements): that pod is helped; nine
// whole GPUs are not.
func TestSpareHelpsAnyDevicePod(t *testing.T) {
	in := spareFleet(t, 4)
	in.Classes = append(in.Classes, gpudratest.Class("any.gpudra.io",
		fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type in ['gpu', 'mig']", driver, driver)))
	any9 := claim("ns", "any", "any.gpudra.io", time.Minute)
	any9.Spec.Devices.Requests[0].Exactly.Count = 9
	in.Claims = append(in.Claims, any9, want("nine", 9, false))
	in.Pods = append(in.Pods, pinned("any", "any", "node-3"), pinned("nine", "nine", "node-3"))
	st, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, u := range st.Unplaced {
		got[u.Pod] = u.Nodes
	}
	if nodes, ok := got["ns/any"]; !ok || !slices.Equal(nodes, []string{"node-3"}) {
		t.Errorf("nine devices of any kind: unplaced %v, helped by a spare on %v; want helped on [node-3]", ok, nodes)
	}
	if nodes, ok := got["ns/nine"]; !ok || len(nodes) > 0 {
		t.Errorf("nine whole GPUs: unplaced %v, helped by a spare on %v; want helped nowhere", ok, nodes)
	}
}

// TestGangOfPartitionsGetsSpares (issue 30): a gang of three 7g.80gb pods
// on a fleet where two nodes publish a spare cannot be placed whole (a
// spare takes one 7g.80gb, the next GPU's placements appear only after a
// prepare, and a gang binds whole), so each of its pods is listed where a
// spare lets it in, and the policy gives the gang a spare per pod on
// nodes without one: five nodes publish one. Before, its pods each fitted
// on a published spare, none was listed, and the gang waited forever.
func TestGangOfPartitionsGetsSpares(t *testing.T) {
	in := spareFleet(t, 8)
	in.Classes = append(in.Classes, gpudratest.Class("mig-7g.gpudra.io",
		fmt.Sprintf("device.driver == '%[1]s' && device.attributes['%[1]s'].type == 'mig' && device.attributes['%[1]s'].profile == '7g.80gb'", driver)))
	in.PodGroups = append(in.PodGroups, gang("trio", 3))
	for i := range 3 {
		c := fmt.Sprintf("big-%d", i)
		in.Claims = append(in.Claims, claim("ns", c, "mig-7g.gpudra.io", time.Minute))
		in.Pods = append(in.Pods, member(fmt.Sprintf("w%d", i), "trio", c))
	}
	current := migspares.Assignment{"node-1": 1, "node-2": 1}
	st, err := Strand(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if st.UnsatisfiableWorkloads != 1 {
		t.Fatalf("%d unsatisfiable workloads, want the gang", st.UnsatisfiableWorkloads)
	}
	if len(st.Unplaced) != 3 {
		t.Fatalf("unplaced %+v, want each of the gang's 3 pods", st.Unplaced)
	}
	for _, u := range st.Unplaced {
		if len(u.Nodes) == 0 || u.Gang != "ns/trio" {
			t.Errorf("%s of gang %q may be helped on %v, want nodes, and its gang ns/trio", u.Pod, u.Gang, u.Nodes)
		}
	}
	res := assignWith(in, st, current, 2, nil)
	if len(res.Assignment) != 5 || len(res.Given) != 3 {
		t.Errorf("assigned %v and given %v, want node-1, node-2 and one node for each of the 3 pods", slices.Sorted(maps.Keys(res.Assignment)), res.Given)
	}
	// The next recompute, the same pods still waiting: the same nodes,
	// no more (once per pod).
	again := assignWith(in, st, res.Assignment, 2, res.Given)
	if !maps.Equal(again.Assignment, res.Assignment) {
		t.Errorf("the next recompute assigned %v, want %v again", slices.Sorted(maps.Keys(again.Assignment)), slices.Sorted(maps.Keys(res.Assignment)))
	}
}
