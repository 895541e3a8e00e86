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
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/plugin"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// fleetOptions is a DGX H100 node whose plugin runs with
// --mig-spare-gpus=fleet, reading the chart's ConfigMap in namespace
// gpudra.
func fleetOptions() Options {
	return Options{Profile: "dgx-h100", SpareGPUs: slicebuilder.SpareGPUs{Fleet: true},
		Namespace: "gpudra", SparesConfigMap: "gpudra-mig-spares"}
}

// sparesConfigMap is a ConfigMap in namespace gpudra with the entries
// given as key, value, key, value, ...
func sparesConfigMap(name string, entries ...string) *v1.ConfigMap {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: name}, Data: map[string]string{}}
	for i := 0; i+1 < len(entries); i += 2 {
		cm.Data[entries[i]] = entries[i+1]
	}
	return cm
}

// migMinors are the minors of the GPUs whose MIG placements the node
// publishes, once the plugin has published all it means to.
func migMinors(ctx context.Context, t testing.TB, c *Cluster) []int {
	t.Helper()
	published, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var minors []int
	for _, s := range published {
		for _, dev := range s.Spec.Devices {
			if name, ok := gpu.ParseDeviceName(dev.Name); ok && name.MIG && !slices.Contains(minors, name.Minor) {
				minors = append(minors, name.Minor)
			}
		}
	}
	slices.Sort(minors)
	return minors
}

// sparesAssigned is the plugin's gpudra_plugin_mig_spares_assigned, -1
// where it exports none.
func sparesAssigned(t testing.TB, c *Cluster) float64 {
	t.Helper()
	families, err := c.Driver.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == plugin.MetricMigSparesAssigned.Name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// waitSparesAssigned waits until the plugin says it was assigned n spares.
func waitSparesAssigned(ctx context.Context, t testing.TB, c *Cluster, n float64) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return sparesAssigned(t, c) == n, nil
	}); err != nil {
		t.Fatalf("%s is %v, want %v", plugin.MetricMigSparesAssigned.Name, sparesAssigned(t, c), n)
	}
}

// TestFleetSpares: with --mig-spare-gpus=fleet a node publishes the
// placements of the spares gpudra-controller assigned it in the spares
// ConfigMap, none without an entry (its partitioned GPUs and the spares
// it published before stay: sticky), and republishes when its entry
// changes.
func TestFleetSpares(t *testing.T) {
	ctx, c := startClusterWith(t, fleetOptions())
	configMaps := c.Client.CoreV1().ConfigMaps("gpudra")
	check := func(step string, want []int) {
		t.Helper()
		if got := migMinors(ctx, t, c); !slices.Equal(got, want) {
			t.Fatalf("%s: the MIG placements of GPUs %v are published, want %v", step, got, want)
		}
	}
	update := func(entries ...string) {
		t.Helper()
		if _, err := configMaps.Update(ctx, sparesConfigMap("gpudra-mig-spares", entries...), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	check("no ConfigMap", nil)
	if got := sparesAssigned(t, c); got != 0 {
		t.Errorf("%s is %v before the ConfigMap exists, want 0", plugin.MetricMigSparesAssigned.Name, got)
	}
	// Another ConfigMap of the namespace says nothing (the API server
	// would not even send it: the watch selects the name; the fake one
	// sends it), nor does another node's entry.
	for _, cm := range []*v1.ConfigMap{sparesConfigMap("other", "node-1", "3"), sparesConfigMap("gpudra-mig-spares", "node-2", "1")} {
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("node-2", "1", "node-1", "1")
	waitSparesAssigned(ctx, t, c, 1)
	check("one spare assigned", []int{7})

	// The entry removed: the free spare stays published (a claim may
	// have been allocated there that has not reached the node yet)...
	update("node-2", "1")
	waitSparesAssigned(ctx, t, c, 0)
	check("the entry removed", []int{7})
	// ... and when a partition takes it, no other GPU becomes a spare.
	part := mustRun(ctx, t, c, migClaim("part", false, "1g.10gb"))
	if d := allocatedDevices(part)[0]; !strings.HasPrefix(d, "gpu-7-mig-") {
		t.Errorf("the partition is %s, want one of the spare, GPU 7", d)
	}
	check("the spare partitioned, none assigned", []int{7})

	// Assigned one again: the next free GPU refills it.
	update("node-2", "1", "node-1", "1")
	waitSparesAssigned(ctx, t, c, 1)
	check("one spare assigned again", []int{6, 7})

	// The ConfigMap deleted: none assigned, the published spare stays.
	if err := configMaps.Delete(ctx, "gpudra-mig-spares", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 0)
	check("the ConfigMap deleted", []int{6, 7})
}

// TestFleetSparesBadValue: an entry that is not a number of GPUs from 1
// counts as none assigned, and the log says which ConfigMap, key and
// value.
func TestFleetSparesBadValue(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	opts := fleetOptions()
	opts.Dir = gpudratest.ShortTempDir(t)
	c, err := Start(ctx, opts, NewClientset(sparesConfigMap("gpudra-mig-spares", "node-1", "two")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)

	logged := func() bool {
		for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
			if e.Type != ktesting.LogError || !strings.Contains(e.Message, "spares ConfigMap") {
				continue
			}
			kv := map[string]string{}
			for _, l := range [][]any{e.WithKVList, e.ParameterKVList} {
				for i := 0; i+1 < len(l); i += 2 {
					kv[fmt.Sprint(l[i])] = fmt.Sprint(l[i+1])
				}
			}
			return kv["configMap"] == "gpudra/gpudra-mig-spares" && kv["key"] == "node-1" && kv["value"] == "two"
		}
		return false
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return logged(), nil
	}); err != nil {
		t.Error("no error logged naming the ConfigMap gpudra/gpudra-mig-spares, the key node-1 and the value two")
	}
	if got := sparesAssigned(t, c); got != 0 {
		t.Errorf("%s is %v, want 0", plugin.MetricMigSparesAssigned.Name, got)
	}
	if got := migMinors(ctx, t, c); len(got) != 0 {
		t.Errorf("the MIG placements of GPUs %v are published, want none", got)
	}
}

// poolShape is the number of the node's slices and their pool
// generation, once the plugin has published all it means to.
func poolShape(ctx context.Context, t testing.TB, c *Cluster) (slices int, generation int64) {
	t.Helper()
	published, err := c.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range published {
		if s.Spec.Pool.Generation > generation {
			generation, slices = s.Spec.Pool.Generation, 0
		}
		if s.Spec.Pool.Generation == generation {
			slices++
		}
	}
	return slices, generation
}

// TestFleetCompactLayout: in fleet mode a node none of whose GPUs
// publishes placements publishes three slices (whole GPUs, one empty
// counter slice, monitors; slicebuilder's layout.go); a restart reads
// them back and writes nothing; the first spare assigned brings the
// fixed layout's eleven slices in one new pool generation, and the last
// published GPU taken whole the three again.
func TestFleetCompactLayout(t *testing.T) {
	ctx, c := startClusterWith(t, fleetOptions())
	check := func(step string, wantSlices int, wantGen int64, wantMIG []int) {
		t.Helper()
		if n, gen := poolShape(ctx, t, c); n != wantSlices || gen != wantGen {
			t.Errorf("%s: %d slices in generation %d, want %d in generation %d", step, n, gen, wantSlices, wantGen)
		}
		if got := migMinors(ctx, t, c); !slices.Equal(got, wantMIG) {
			t.Errorf("%s: the MIG placements of GPUs %v are published, want %v", step, got, wantMIG)
		}
	}
	check("none assigned", 3, 1, nil)

	restarted, err := c.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	c = restarted
	check("restarted, none assigned", 3, 1, nil)

	cm, err := c.Client.CoreV1().ConfigMaps("gpudra").Create(ctx, sparesConfigMap("gpudra-mig-spares", "node-1", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 1)
	check("one spare assigned", 11, 2, []int{7})

	// The assignment removed: the spare stays published (sticky), and so
	// does the fixed layout.
	cm.Data = map[string]string{}
	if _, err := c.Client.CoreV1().ConfigMaps("gpudra").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 0)
	check("the assignment removed", 11, 2, []int{7})

	// Every GPU taken whole, the published one with them: compact again.
	all := mustRun(ctx, t, c, gpuClaim("all", 8, ""))
	check("all taken whole", 3, 3, nil)
	if err := c.StopPod(ctx, all); err != nil {
		t.Fatal(err)
	}
	check("all freed", 3, 3, nil)
}

// wipeSlices deletes the node's ResourceSlices, as the kubelet does on
// every start and 30 s after a plugin goes away.
func wipeSlices(ctx context.Context, t testing.TB, c *Cluster) {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Spec.Driver != c.Opts.DriverName {
			continue
		}
		if err := c.Client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFleetSpareSurviveSliceWipe: a partition claim allocated on the
// spare (GPU 7) and not yet prepared; the node's assignment dropped; the
// kubelet wipes the node's slices; the plugin restarts. GPU 7's
// placements are still published (the checkpoint says they were), so an
// 8-GPU claim cannot be given GPU 7 whole under the partition claim, and
// the partition claim prepares.
func TestFleetSpareSurviveSliceWipe(t *testing.T) {
	ctx, c := startClusterWith(t, fleetOptions())
	configMaps := c.Client.CoreV1().ConfigMaps("gpudra")
	cm, err := configMaps.Create(ctx, sparesConfigMap("gpudra-mig-spares", "node-1", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 1)
	if got := migMinors(ctx, t, c); !slices.Equal(got, []int{7}) {
		t.Fatalf("one spare assigned: the MIG placements of GPUs %v are published, want [7]", got)
	}

	// Allocated, not prepared: the kubelet has not reached it yet.
	part, err := c.CreateClaim(ctx, migClaim("part", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	if part, err = c.Allocate(ctx, part); err != nil {
		t.Fatal(err)
	}
	if d := part.Status.Allocation.Devices.Results[0].Device; !strings.HasPrefix(d, "gpu-7-mig-") {
		t.Fatalf("the partition is %s, want one of the spare, GPU 7", d)
	}

	cm.Data = map[string]string{}
	if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 0)

	c.Stop()
	wipeSlices(ctx, t, c)
	restarted, err := Start(ctx, c.Opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	c = restarted
	waitSparesAssigned(ctx, t, c, 0)

	if got := migMinors(ctx, t, c); !slices.Equal(got, []int{7}) {
		t.Errorf("after the wipe and restart: the MIG placements of GPUs %v are published, want [7] (a claim is allocated there)", got)
	}
	whole, err := c.CreateClaim(ctx, gpuClaim("all", 8, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Allocate(ctx, whole); !errors.Is(err, ErrUnschedulable) {
		if err == nil {
			var devices []string
			for _, r := range got.Status.Allocation.Devices.Results {
				devices = append(devices, r.Device)
			}
			t.Errorf("an 8-GPU claim was allocated %v: GPU 7 whole, under the partition claim allocated there", devices)
		} else {
			t.Errorf("allocating an 8-GPU claim: %v, want it unschedulable", err)
		}
	}
	res, err := c.RunPod(ctx, podUsing("pod-part", "part"))
	if err != nil {
		t.Fatalf("the partition claim allocated before the restart: %v", err)
	}
	if d := allocatedDevices(res)[0]; !strings.HasPrefix(d, "gpu-7-mig-") {
		t.Errorf("the partition is %s, want the one allocated on GPU 7", d)
	}
}

// TestFleetSpareRecordedBeforePublished: the API server never accepts a
// slice holding a GPU's MIG placements that the checkpoint on disk does
// not record, so a crash at any point (before or after either write)
// leaves every published placement recorded. While the record cannot be
// written the new spare is not published; once it can, it is (the plugin
// tries again).
func TestFleetSpareRecordedBeforePublished(t *testing.T) {
	opts := fleetOptions()
	opts.Dir = gpudratest.ShortTempDir(t)
	opts.defaults()
	var (
		mu         sync.Mutex
		failWrites bool
		unrecorded []string
	)
	opts.Hooks.BeforeCheckpointWrite = func() error {
		mu.Lock()
		defer mu.Unlock()
		if failWrites {
			return errors.New("simulated crash before the checkpoint write")
		}
		return nil
	}
	cpPath := filepath.Join(opts.PluginDataDir(), plugin.CheckpointFile)
	client := NewClientset()
	checkRecorded := func(action k8stesting.Action) (bool, runtime.Object, error) {
		withObj, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		slice, ok := withObj.GetObject().(*resourceapi.ResourceSlice)
		if !ok {
			return false, nil, nil
		}
		cp, err := checkpoint.NewStore(cpPath).Load()
		if err != nil {
			return true, nil, err
		}
		for _, dev := range slice.Spec.Devices {
			name, ok := gpu.ParseDeviceName(dev.Name)
			if !ok || !name.MIG {
				continue
			}
			uuid := dev.Attributes[slicebuilder.AttrParentUUID].StringValue
			if uuid == nil || !slices.Contains(cp.MigPublished, *uuid) {
				mu.Lock()
				unrecorded = append(unrecorded, dev.Name)
				mu.Unlock()
			}
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "resourceslices", checkRecorded)
	client.PrependReactor("update", "resourceslices", checkRecorded)
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, opts, client)
	if err != nil {
		t.Fatalf("start simulated node: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	applyClasses(ctx, t, c)

	mu.Lock()
	failWrites = true
	mu.Unlock()
	if _, err := c.Client.CoreV1().ConfigMaps("gpudra").Create(ctx, sparesConfigMap("gpudra-mig-spares", "node-1", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSparesAssigned(ctx, t, c, 1)
	if got := migMinors(ctx, t, c); len(got) != 0 {
		t.Errorf("while the checkpoint cannot be written: the MIG placements of GPUs %v are published, want none", got)
	}

	mu.Lock()
	failWrites = false
	mu.Unlock()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(migMinors(ctx, t, c), []int{7}), nil
	}); err != nil {
		t.Errorf("once the checkpoint can be written: the MIG placements of GPUs %v are published, want [7]", migMinors(ctx, t, c))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(unrecorded) > 0 {
		t.Errorf("the API server accepted MIG placements the checkpoint on disk did not record: %v", unrecorded)
	}
}
