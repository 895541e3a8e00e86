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

package slicebuilder

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

// h100MIG is the MIG table of an H100 80GB (the fake's), trimmed to three
// profiles to keep the test readable.
func pls(starts []int, size int) []gpu.MigPlacement {
	var out []gpu.MigPlacement
	for _, s := range starts {
		out = append(out, gpu.MigPlacement{Start: s, Size: size})
	}
	return out
}

func h100MIG() *gpu.MIG {
	return &gpu.MIG{
		MemorySlices: 8, ComputeSlices: 7,
		Profiles: []gpu.MigProfile{
			{Name: "1g.10gb", ID: 19, ComputeSlices: 1, InstanceCount: 7, MemoryBytes: 10 << 30, Multiprocessors: 16, CopyEngines: 1, Decoders: 1,
				Placements: pls([]int{0, 1, 2, 3, 4, 5, 6}, 1)},
			{Name: "3g.40gb", ID: 9, ComputeSlices: 3, InstanceCount: 2, MemoryBytes: 40 << 30, Multiprocessors: 48, CopyEngines: 3, Decoders: 2,
				Placements: pls([]int{0, 4}, 4)},
			{Name: "1g.10gb+me", ID: 20, ComputeSlices: 1, InstanceCount: 1, MemoryBytes: 10 << 30, Multiprocessors: 16, CopyEngines: 1, Decoders: 1, JPEGEngines: 1, OFAEngines: 1,
				Placements: pls([]int{0, 1, 2, 3, 4, 5, 6}, 1)},
		},
	}
}

func migNode(mig *gpu.MIG, enabled bool) gpu.Node {
	node := h100Node("node-a", 2)
	for i := range node.GPUs {
		m := *mig
		node.GPUs[i].MIG = &m
		node.GPUs[i].MigEnabled = enabled
	}
	return node
}

func TestBuildMIG(t *testing.T) {
	res, err := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	sl := res.Pools["node-a"].Slices
	// whole GPUs, counter sets, GPU 1's placements (the spare: the highest
	// minor), GPU 0's (empty: not a spare), monitors
	// (the spare's counter set only: GPU 0 publishes no placements, so
	// nothing consumes counters of it)
	if len(sl) != 5 || len(sl[0].Devices) != 2 || len(sl[1].SharedCounters) != 1 || len(sl[2].Devices) != 16 || len(sl[3].Devices) != 0 || len(sl[4].Devices) != 2 {
		t.Fatalf("layout: %d slices", len(sl))
	}
	cs := sl[1].SharedCounters[0]
	if cs.Name != "gpu-1-counters" {
		t.Errorf("counter set %s", cs.Name)
	}
	// Only counters that can refuse a combination: the memory slices and
	// the instance count of +me (one of seven placements).
	want := map[string]string{"1g10gbme-instances": "1"}
	for i := range 8 {
		want[MemorySliceCounter(i)] = "1"
	}
	if len(cs.Counters) != len(want) {
		t.Errorf("counters %v, want %v", cs.Counters, want)
	}
	for k, v := range want {
		q, ok := cs.Counters[k]
		if !ok || q.Value.String() != v {
			t.Errorf("counter %s = %v, want %s", k, q.Value.String(), v)
		}
	}
	whole := sl[0].Devices[1]
	if whole.Name != "gpu-1" || len(whole.ConsumesCounters) != 1 || len(whole.ConsumesCounters[0].Counters) != len(cs.Counters) {
		t.Errorf("the whole GPU does not consume the whole counter set: %+v", whole.ConsumesCounters)
	}
	if w0 := sl[0].Devices[0]; len(w0.ConsumesCounters) != 0 {
		t.Errorf("%s consumes %+v: a whole GPU whose placements are not published consumes no counters", w0.Name, w0.ConsumesCounters)
	}
	me := sl[2].Devices[9] // 7 × 1g, 2 × 3g, then the first +me
	if me.Name != "gpu-1-mig-1g10gbme-0" || *me.Attributes[AttrType].StringValue != TypeMIG || *me.Attributes[AttrProfile].StringValue != "1g.10gb+me" {
		t.Fatalf("device %s %v", me.Name, me.Attributes)
	}
	c := me.ConsumesCounters[0].Counters
	for _, k := range []string{"memory-slice-0", "1g10gbme-instances"} {
		if _, ok := c[k]; !ok {
			t.Errorf("%s does not consume %s", me.Name, k)
		}
	}
	if _, ok := c["memory-slice-1"]; ok {
		t.Errorf("%s consumes a memory slice outside its placement", me.Name)
	}
	// A partition carries what partitions are selected by, and what
	// NVIDIA's partitions carry of their GPU, with the GPU's values;
	// nothing that names the GPU as a GPU (its uuid, index, minor). No
	// pcieRoot: this node has no sysfs (TestPartitionParentAttributes).
	wantAttrs := map[resourceapi.QualifiedName]string{
		AttrType: "string mig", AttrProfile: "string 1g.10gb+me", AttrParentUUID: "string GPU-h100-0001",
		AttrProductName: "string NVIDIA H100 80GB HBM3", AttrBrand: "string Nvidia", AttrArchitecture: "string Hopper",
		AttrCUDAComputeCapability: "version 9.0.0", AttrDriverVersion: "version 550.54.15", AttrCUDADriverVersion: "version 12.4.0",
		AttrPCIBusID: "string 0000:01:00.0",
	}
	if len(me.Attributes) != len(wantAttrs) {
		t.Errorf("%s: %d attributes, want %d", me.Name, len(me.Attributes), len(wantAttrs))
	}
	for name, v := range wantAttrs {
		if got := attrString(me.Attributes[name]); got != v {
			t.Errorf("%s: attribute %s = %q, want %q", me.Name, name, got, v)
		}
	}
	for _, name := range []resourceapi.QualifiedName{CapMemory, CapMultiprocessors, CapCopyEngines, CapDecoders, CapEncoders, CapJPEGEngines, CapOFAEngines} {
		if _, ok := me.Capacity[name]; !ok {
			t.Errorf("%s has no capacity %s", me.Name, name)
		}
	}
}

// TestPartitionParentAttributes: every partition carries exactly the
// PartitionParentAttributes its GPU carries, with the GPU's values (the
// standard PCI ones included where sysfs tells them), and none of the
// GPU's others.
func TestPartitionParentAttributes(t *testing.T) {
	node := migNode(h100MIG(), true)
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: h100Sysfs(t, node), SpareGPUs: SpareGPUs{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	whole := map[string]resourceapi.Device{}
	var partitions []resourceapi.Device
	for _, s := range res.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			switch attrString(d.Attributes[AttrType]) {
			case "string " + TypeGPU:
				whole[*d.Attributes[AttrUUID].StringValue] = d
			case "string " + TypeMIG:
				partitions = append(partitions, d)
			}
		}
	}
	if len(whole) != 2 || len(partitions) != 32 {
		t.Fatalf("%d whole GPUs, %d partitions", len(whole), len(partitions))
	}
	for _, d := range partitions {
		parent, ok := whole[*d.Attributes[AttrParentUUID].StringValue]
		if !ok {
			t.Fatalf("%s: no whole GPU has its parentUUID", d.Name)
		}
		for _, name := range PartitionParentAttributes {
			if _, ok := parent.Attributes[name]; !ok {
				t.Fatalf("%s carries no %s: the test's GPU should carry every one", parent.Name, name)
			}
			if got, want := attrString(d.Attributes[name]), attrString(parent.Attributes[name]); got != want {
				t.Errorf("%s: %s = %q, its GPU's is %q", d.Name, name, got, want)
			}
		}
		if want := 3 + len(PartitionParentAttributes); len(d.Attributes) != want {
			t.Errorf("%s: %d attributes, want %d (type, profile, parentUUID and the GPU's)", d.Name, len(d.Attributes), want)
		}
	}
}

// TestComputeCounter: a GPU whose compute slices bind beyond its memory
// slices gets a compute-slices counter that every placement consumes its
// share of, and an admin's instance takes its share out.
func TestComputeCounter(t *testing.T) {
	mig := h100MIG()
	mig.ComputeSlices = 3 // three 1g and a 3g fit the memory slices, not the compute
	if !mig.ComputeLimitBinds() {
		t.Fatal("ComputeLimitBinds = false on a GPU with 3 compute slices")
	}
	if h100MIG().ComputeLimitBinds() {
		t.Fatal("ComputeLimitBinds = true on the H100's table")
	}
	node := migNode(mig, true)
	admin := map[string][]gpu.MigInstance{node.GPUs[1].UUID: {{GIID: 1, ProfileID: 19, Placement: gpu.MigPlacement{Start: 0, Size: 1}}}}
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, AdminInstances: admin})
	if err != nil {
		t.Fatal(err)
	}
	sl := res.Pools["node-a"].Slices
	for i, want := range []string{"3", "2"} {
		q := sl[1].SharedCounters[i].Counters[CounterComputeSlices]
		if got := q.Value.String(); got != want {
			t.Errorf("GPU %d: compute-slices = %s, want %s", i, got, want)
		}
	}
	d := deviceNamed(sl, "gpu-1-mig-3g40gb-4")
	if d == nil {
		t.Fatal("gpu-1-mig-3g40gb-4 is not published")
	}
	if q := d.ConsumesCounters[0].Counters[CounterComputeSlices]; q.Value.String() != "3" {
		t.Errorf("a 3g consumes %s compute slices", q.Value.String())
	}
}

func TestBuildMIGAmpere(t *testing.T) {
	mig := h100MIG()
	mig.ModeChangeNeedsReset = true
	res, err := Build(migNode(mig, false), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	if sl := res.Pools["node-a"].Slices; len(sl) != 2 || len(sl[0].Devices) != 2 || len(sl[0].Devices[0].ConsumesCounters) != 0 {
		t.Errorf("Ampere with MIG off: want whole GPUs and their monitors only, got %d slices", len(sl))
	}
	res, err = Build(migNode(mig, true), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			if !strings.Contains(d.Name, "-mig-") && !strings.HasSuffix(d.Name, "-monitor") {
				t.Errorf("Ampere with MIG on publishes the whole GPU %s", d.Name)
			}
		}
	}
}

func TestBuildMIGAdminAndFallback(t *testing.T) {
	node := migNode(h100MIG(), true)
	admin := map[string][]gpu.MigInstance{node.GPUs[1].UUID: {{GIID: 1, ProfileID: 9, Placement: gpu.MigPlacement{Start: 4, Size: 4}}}}
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, AdminInstances: admin})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var cs resourceapi.CounterSet
	for _, s := range res.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			names[d.Name] = true
		}
		for _, c := range s.SharedCounters {
			if c.Name == "gpu-1-counters" {
				cs = c
			}
		}
	}
	for _, gone := range []string{"gpu-1", "gpu-1-mig-3g40gb-4", "gpu-1-mig-1g10gb-5"} {
		if names[gone] {
			t.Errorf("%s is published beside an admin's instance", gone)
		}
	}
	for _, kept := range []string{"gpu-0", "gpu-1-mig-3g40gb-0", "gpu-1-mig-1g10gb-3"} {
		if !names[kept] {
			t.Errorf("%s is not published", kept)
		}
	}
	if _, ok := cs.Counters["memory-slice-5"]; ok {
		t.Error("an admin's memory slice is still counted as free")
	}

	res, err = Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, WholeGPUsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if sl := res.Pools["node-a"].Slices; len(sl) != 2 || len(sl[0].Devices) != 2 || len(sl[0].Devices[0].ConsumesCounters) != 0 {
		t.Errorf("WholeGPUsOnly: %d slices", len(sl))
	}
}

// TestValidateCounterReferences: a device that consumes a counter set or
// counter the pool lacks is caught before publishing.
func TestValidateCounterReferences(t *testing.T) {
	res, err := Build(migNode(h100MIG(), false), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	pool := res.Pools["node-a"]
	if len(pool.Slices[2].Devices) == 0 {
		t.Fatal("the spare's placements are not in slice 2")
	}
	pool.Slices[2].Devices[0].ConsumesCounters[0].Counters["no-such-counter"] = resourceapi.Counter{}
	if err := Validate(testDriver, res); err == nil || !strings.Contains(err.Error(), "no-such-counter") {
		t.Errorf("Validate = %v", err)
	}
	delete(pool.Slices[2].Devices[0].ConsumesCounters[0].Counters, "no-such-counter")
	pool.Slices[2].Devices[0].ConsumesCounters[0].CounterSet = "gpu-9-counters"
	if err := Validate(testDriver, res); err == nil || !strings.Contains(err.Error(), "gpu-9-counters") {
		t.Errorf("Validate = %v", err)
	}
}

// TestMonitorDevices: every GPU also has a monitoring device, last in the
// pool, that consumes no counters and carries no health taint, so an
// admin-access request gets it whatever runs on the GPU and however healthy
// it is; only its monitoring-only taint, which keeps workloads off it, and
// the GPU's capacities.
func TestMonitorDevices(t *testing.T) {
	node := migNode(h100MIG(), false)
	sick := node.GPUs[1].UUID
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs, Health: map[string]gpu.Health{sick: gpu.Unhealthy}})
	if err != nil {
		t.Fatal(err)
	}
	sl := res.Pools["node-a"].Slices
	last := sl[len(sl)-1].Devices
	if len(last) != len(node.GPUs) {
		t.Fatalf("last slice holds %d devices, want one monitor per GPU", len(last))
	}
	for i, d := range last {
		g := node.GPUs[i]
		if d.Name != g.MonitorDeviceName() || *d.Attributes[AttrType].StringValue != TypeMonitor ||
			*d.Attributes[AttrUUID].StringValue != g.UUID || *d.Attributes[AttrProductName].StringValue != g.ProductName {
			t.Errorf("monitor %d: %+v", i, d)
		}
		if len(d.ConsumesCounters) != 0 {
			t.Errorf("%s consumes counters: %+v", d.Name, d.ConsumesCounters)
		}
		whole := deviceNamed(sl, g.DeviceName())
		if whole == nil {
			t.Fatalf("no whole-GPU device %s", g.DeviceName())
		}
		for name, a := range whole.Attributes {
			if name != AttrType && !equality.Semantic.DeepEqual(d.Attributes[name], a) {
				t.Errorf("%s attribute %s = %+v, want the whole GPU's %+v", d.Name, name, d.Attributes[name], a)
			}
		}
		want := []resourceapi.DeviceTaint{{Key: testDriver + "/monitoring-only", Value: "admin-access", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		if !equality.Semantic.DeepEqual(d.Taints, want) {
			t.Errorf("%s taints %+v, want only %+v (no health taint on the sick GPU's either)", d.Name, d.Taints, want)
		}
		if m := d.Capacity[CapMemory].Value; m.Value() != int64(g.MemoryBytes) {
			t.Errorf("%s memory %v, want the GPU's %d", d.Name, m, g.MemoryBytes)
		}
	}
}

// deviceNamed is the device of that name in the slices, nil if none.
func deviceNamed(sl []resourceslice.Slice, name string) *resourceapi.Device {
	for _, s := range sl {
		for i := range s.Devices {
			if s.Devices[i].Name == name {
				return &s.Devices[i]
			}
		}
	}
	return nil
}
