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

package controller

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// spareNodes is the fake fleet of the spare tests: DGX H100 nodes whose
// plugins run in fleet mode.
const spareNodes = 4

// fleetSlices are node i's slices (1-based) as its plugin publishes them
// with n spares assigned.
func fleetSlices(t *testing.T, i, n int) []*resourceapi.ResourceSlice {
	t.Helper()
	out, err := fakenodes.Node(context.Background(), fakenodes.DefaultProfile, fakenodes.NodeName(i), testDriver, t.TempDir(),
		fakenodes.Pool{SpareGPUs: slicebuilder.FleetAssigned(n)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newSpareCluster is spareNodes idle nodes, ready, publishing no spare,
// and the ConfigMap when withConfigMap.
func newSpareCluster(t *testing.T, withConfigMap bool) *fake.Clientset {
	t.Helper()
	var objs []runtime.Object
	for i := 1; i <= spareNodes; i++ {
		for _, s := range fleetSlices(t, i, 0) {
			objs = append(objs, s)
		}
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fakenodes.NodeName(i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	if withConfigMap {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: DefaultMigSparesConfigMap}})
	}
	return fake.NewClientset(objs...)
}

// startSpares runs a controller with the fleet accounting and the spares
// alone (no webhook, no leader election).
func startSpares(t *testing.T, cs *fake.Clientset, target string) *replica {
	t.Helper()
	tgt, err := migspares.ParseTarget(target)
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		DriverName: testDriver, Client: cs, Namespace: "gpudra", Identity: "only",
		MetricsListener: ml, FleetAccounting: true, RecomputeInterval: 50 * time.Millisecond,
		MigSpareNodes: tgt,
	}
	r := &replica{metricsURL: "http://" + ml.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("controller did not stop")
		}
	})
	return r
}

// assigned is the ConfigMap's data; nil when it cannot be read.
func assigned(cs *fake.Clientset) map[string]string {
	cm, err := cs.CoreV1().ConfigMaps("gpudra").Get(context.Background(), DefaultMigSparesConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm.Data
}

func spareGauge(state string) string { return MetricMigSpareNodes.Name + `{state="` + state + `"}` }

func writeErrors(reason string) string {
	return MetricMigSpareWriteErrors.Name + `{reason="` + reason + `"}`
}

// TestSparesFollowTheFleet: the leader assigns the target's nodes a spare
// in the ConfigMap, then moves an assignment off a node whose every GPU
// claims took, and keeps the other.
func TestSparesFollowTheFleet(t *testing.T) {
	ctx := context.Background()
	cs := newSpareCluster(t, true)
	// The first write conflicts (another writer): counted, and retried
	// at the next recompute.
	conflicts := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, DefaultMigSparesConfigMap, nil)
	})
	r := startSpares(t, cs, "5%")

	// 5% of 4 nodes is under the floor of 2.
	waitFor(t, "two nodes assigned", func() bool { return len(assigned(cs)) == 2 })
	first := assigned(cs)
	for node, v := range first {
		if v != "1" || !strings.HasPrefix(node, "node-") {
			t.Errorf("assignment %s=%q, want a fake node with 1", node, v)
		}
	}
	// The gauges are set after the write returns: the ConfigMap can be
	// read before they are.
	var m map[string]float64
	waitFor(t, "the gauges of the first write", func() bool { m = r.scrape(t); return m[spareGauge("assigned")] == 2 })
	if m[spareGauge("target")] != 2 || m[spareGauge("with_spare")] != 2 || m[spareGauge("assigned")] != 2 {
		t.Errorf("after the first write: target %v, with_spare %v, assigned %v; want 2, 2, 2",
			m[spareGauge("target")], m[spareGauge("with_spare")], m[spareGauge("assigned")])
	}
	if m[writeErrors("conflict")] != 1 || m[writeErrors("missing")] != 0 {
		t.Errorf("write errors: conflict %v, missing %v; want 1, 0", m[writeErrors("conflict")], m[writeErrors("missing")])
	}

	// The plugin of one assigned node publishes its spare; a claim takes
	// one of its placements and another every other GPU of the node.
	names := slices.Sorted(maps.Keys(first))
	full, kept := names[0], names[1]
	idx := 0
	for j := 1; j <= spareNodes; j++ {
		if fakenodes.NodeName(j) == full {
			idx = j
		}
	}
	// Without a spare it published fleet mode's compact layout (3
	// slices), with one the fixed layout (11): a new pool generation, as
	// the ResourceSlice controller writes it, the old slices deleted.
	published := fleetSlices(t, idx, 1)
	var mig string
	var parent string
	for _, s := range published {
		for _, d := range s.Spec.Devices {
			if a := d.Attributes[slicebuilder.AttrType]; mig == "" && a.StringValue != nil && *a.StringValue == slicebuilder.TypeMIG {
				mig, parent = d.Name, *d.Attributes[slicebuilder.AttrParentUUID].StringValue
			}
		}
	}
	for _, s := range fleetSlices(t, idx, 0) {
		if err := cs.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range published {
		s.Spec.Pool.Generation = 2
		if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if mig == "" {
		t.Fatalf("%s publishes no MIG placement with one spare assigned", full)
	}
	results := []resourceapi.DeviceRequestAllocationResult{gpudratest.Result("mig", testDriver, full, mig)}
	for _, s := range published {
		for _, d := range s.Spec.Devices {
			a, u := d.Attributes[slicebuilder.AttrType], d.Attributes[slicebuilder.AttrUUID]
			if a.StringValue != nil && *a.StringValue == slicebuilder.TypeGPU && *u.StringValue != parent {
				results = append(results, gpudratest.Result("gpus", testDriver, full, d.Name))
			}
		}
	}
	if len(results) != 8 {
		t.Fatalf("%d devices to allocate on %s, want the placement and 7 whole GPUs", len(results), full)
	}
	claim := gpudratest.Allocate(gpudratest.Claim("ns", "all-of-"+full), results...)
	if _, err := cs.ResourceV1().ResourceClaims("ns").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the assignment moved off "+full, func() bool { a := assigned(cs); _, ok := a[full]; return len(a) == 2 && !ok })
	after := assigned(cs)
	if after[kept] != "1" {
		t.Errorf("%s lost its assignment (no churn while it has a free GPU): %v", kept, after)
	}
}

// TestSparesMissingConfigMap: without the ConfigMap the controller says so
// in its log and metrics, creates nothing, and writes it once it exists.
func TestSparesMissingConfigMap(t *testing.T) {
	cs := newSpareCluster(t, false)
	r := startSpares(t, cs, "2")
	waitFor(t, "the missing ConfigMap counted", func() bool { return r.scrape(t)[writeErrors("missing")] >= 1 })
	if a := assigned(cs); a != nil {
		t.Fatalf("the controller created the ConfigMap: %v", a)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "configmaps" {
			t.Errorf("the controller tried to create the ConfigMap: %v", a)
		}
	}
	if m := r.scrape(t); m[spareGauge("assigned")] != 0 {
		t.Errorf("assigned %v without a ConfigMap, want 0", m[spareGauge("assigned")])
	}
	// The chart's upgrade creates it: the next recompute writes it, with
	// nothing else changing.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: DefaultMigSparesConfigMap}}
	if _, err := cs.CoreV1().ConfigMaps("gpudra").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two nodes assigned", func() bool { return len(assigned(cs)) == 2 })
}

// TestSparesOff: --mig-spare-nodes=0 writes nothing and exports no spare
// metrics.
func TestSparesOff(t *testing.T) {
	cs := newSpareCluster(t, true)
	r := startSpares(t, cs, "0")
	waitFor(t, "a recompute", func() bool { return r.scrape(t)[MetricRecomputes.Name] >= 1 })
	m := r.scrape(t)
	if _, ok := m[spareGauge("target")]; ok {
		t.Errorf("spare metrics exported while off: %v", m[spareGauge("target")])
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "configmaps" {
			t.Errorf("the ConfigMap was touched while off: %v", a)
		}
	}
}

// TestSpareKeeperRewritesWhatItCannotRead: values that are no number from
// 1 are read as no assignment and replaced at the next write; an
// unchanged assignment is not written again.
func TestSpareKeeperRewritesWhatItCannotRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: DefaultMigSparesConfigMap},
		Data: map[string]string{"a": "x", "b": "0", "gone": "1"}}
	cs := fake.NewClientset(cm)
	m := newMetrics(true, false)
	m.registerSpares()
	k := &spareKeeper{client: cs, namespace: "gpudra", name: DefaultMigSparesConfigMap, target: migspares.Target{N: 2}, m: m}
	view := map[string]fleet.MIGNode{
		"a": {Schedulable: true, GPUs: []fleet.MIGGPU{{UUID: "GPU-a0"}}},
		"b": {Schedulable: true, GPUs: []fleet.MIGGPU{{UUID: "GPU-b0"}, {UUID: "GPU-b1"}}},
	}
	if !k.update(ctx, time.Now(), view, nil) {
		t.Fatal("update failed")
	}
	if got := assigned(cs); !maps.Equal(got, map[string]string{"a": "1", "b": "1"}) {
		t.Errorf("ConfigMap %v, want a=1 and b=1", got)
	}
	writes := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	before := writes()
	if !k.update(ctx, time.Now(), view, nil) || writes() != before {
		t.Errorf("an unchanged assignment was written again (%d updates, then %d)", before, writes())
	}
	s := gpudratest.Gather(t, m.registry)
	if s[spareGauge("assigned")] != 2 || s[spareGauge("target")] != 2 || s[spareGauge("with_spare")] != 2 {
		t.Errorf("metrics %v", s)
	}
}

// TestSpareKeeperWritesOnlyWhatItAssigns: the controller owns the spares
// ConfigMap. A value it never assigns (a hand edit of 2147483647, which
// would make the node publish every free GPU's placements) is not kept in
// its writes, a huge value is logged cut short, and the value it writes
// for a kept node is 1, within the node's GPUs.
func TestSpareKeeperWritesOnlyWhatItAssigns(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	huge := strings.Repeat("9", 64<<10)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: DefaultMigSparesConfigMap},
		Data: map[string]string{"a": "2147483647", "b": huge, "c": " 1\n"}}
	cs := fake.NewClientset(cm)
	m := newMetrics(true, false)
	m.registerSpares()
	k := &spareKeeper{client: cs, namespace: "gpudra", name: DefaultMigSparesConfigMap, target: migspares.Target{N: 2}, m: m}
	view := map[string]fleet.MIGNode{
		"a": {Schedulable: true, GPUs: []fleet.MIGGPU{{UUID: "GPU-a0"}, {UUID: "GPU-a1"}, {UUID: "GPU-a2"}, {UUID: "GPU-a3"}}},
		"b": {Schedulable: true, GPUs: []fleet.MIGGPU{{UUID: "GPU-b0"}}},
		"c": {Schedulable: true, GPUs: []fleet.MIGGPU{{UUID: "GPU-c0"}}},
	}
	if !k.update(ctx, time.Now(), view, nil) {
		t.Fatal("update failed")
	}
	got := assigned(cs)
	for node, v := range got {
		if v != "1" {
			t.Errorf("ConfigMap %s=%.20q, want 1: the controller writes only what it assigns", node, v)
		}
	}
	if len(got) != 2 {
		t.Errorf("ConfigMap has %d entries (%v), want the target's 2", len(got), slices.Sorted(maps.Keys(got)))
	}
	entries := logger.GetSink().(ktesting.Underlier).GetBuffer().Data()
	if len(entries) == 0 {
		t.Error("nothing logged about the foreign values")
	}
	for _, e := range entries {
		for _, l := range [][]any{e.WithKVList, e.ParameterKVList} {
			for i := 1; i < len(l); i += 2 {
				if s, ok := l[i].(string); ok && len(s) > 100 {
					t.Errorf("log %q: a value of %d bytes, want it cut short", e.Message, len(s))
				}
			}
		}
	}
}
