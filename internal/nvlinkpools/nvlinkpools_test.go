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

package nvlinkpools

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const (
	driver  = "gpu.gpudra.io"
	domainA = "9f410827-489f-46fd-8203-51266ca08eb7.32766"
	domainB = "0e6a0c1b-5d77-4b8e-9b1f-2d0d6a3b1c55.1"
)

var label = slicebuilder.NVLinkDomainLabel(driver)

// nodeSlice is a node's pool as its plugin publishes it: four whole GPUs,
// each carrying domain (none when empty).
func nodeSlice(node, domain string, generation int64) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
		},
	}
	for i := range 4 {
		d := resourceapi.Device{Name: "gpu-" + string(rune('0'+i)), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			slicebuilder.AttrType: {StringValue: ptr.To(slicebuilder.TypeGPU)},
		}}
		if domain != "" {
			d.Attributes[slicebuilder.AttrNVLinkDomain] = resourceapi.DeviceAttribute{StringValue: ptr.To(domain)}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func node(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestValidateChannels(t *testing.T) {
	for n, ok := range map[int]bool{0: false, 1: true, slicebuilder.DefaultChannels: true, slicebuilder.MaxChannels: true, slicebuilder.MaxChannels + 1: false, -1: false} {
		if err := slicebuilder.ValidateChannels(n); (err == nil) != ok {
			t.Errorf("slicebuilder.ValidateChannels(%d) = %v, want ok=%v", n, err, ok)
		}
	}
}

// TestPools: a pool per domain, on the domain's nodes, channel-0 shared
// and the others exclusive, in slices the API accepts.
func TestPools(t *testing.T) {
	res := slicebuilder.ChannelPools(driver, []string{domainA, domainB}, slicebuilder.DefaultChannels)
	if len(res.Pools) != 2 {
		t.Fatalf("%d pools, want 2", len(res.Pools))
	}
	pool, ok := res.Pools[slicebuilder.ChannelPoolName(domainA)]
	if !ok {
		t.Fatalf("no pool %s: %v", slicebuilder.ChannelPoolName(domainA), res.Pools)
	}
	req := pool.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != label || req.Operator != v1.NodeSelectorOpIn || !slices.Equal(req.Values, []string{domainA}) {
		t.Errorf("node selector %+v, want %s In [%s]", req, label, domainA)
	}
	if len(pool.Slices) != 1 || len(pool.Slices[0].Devices) != slicebuilder.DefaultChannels+1 {
		t.Fatalf("default pool: %d slices, want one of %d devices", len(pool.Slices), slicebuilder.DefaultChannels+1)
	}
	for i, d := range pool.Slices[0].Devices {
		if d.Name != slicebuilder.ChannelDeviceName(i) || *d.Attributes[slicebuilder.AttrChannel].IntValue != int64(i) ||
			*d.Attributes[slicebuilder.AttrType].StringValue != slicebuilder.TypeIMEXChannel ||
			*d.Attributes[slicebuilder.AttrNVLinkDomain].StringValue != domainA {
			t.Errorf("device %d: %+v", i, d)
		}
		if shared := ptr.Deref(d.AllowMultipleAllocations, false); shared != (i == 0) {
			t.Errorf("%s: allowMultipleAllocations %v, want %v", d.Name, shared, i == 0)
		}
	}
	big := slicebuilder.ChannelPools(driver, []string{domainA}, slicebuilder.MaxChannels).Pools[slicebuilder.ChannelPoolName(domainA)]
	total := 0
	for _, s := range big.Slices {
		if len(s.Devices) > resourceapi.ResourceSliceMaxDevices {
			t.Errorf("a slice of %d devices; the API takes %d", len(s.Devices), resourceapi.ResourceSliceMaxDevices)
		}
		total += len(s.Devices)
	}
	if total != slicebuilder.MaxChannels+1 {
		t.Errorf("%d channels in the largest pool, want %d", total, slicebuilder.MaxChannels+1)
	}
}

func TestNodeDomain(t *testing.T) {
	mixed := nodeSlice("n", domainA, 1)
	mixed.Spec.Devices[3].Attributes[slicebuilder.AttrNVLinkDomain] = resourceapi.DeviceAttribute{StringValue: ptr.To(domainB)}
	for name, tc := range map[string]struct {
		slices  []*resourceapi.ResourceSlice
		want    string
		wantErr string
	}{
		"one domain":        {slices: []*resourceapi.ResourceSlice{nodeSlice("n", domainA, 1)}, want: domainA},
		"no fabric":         {slices: []*resourceapi.ResourceSlice{nodeSlice("n", "", 1)}},
		"no slices":         {},
		"GPUs disagree":     {slices: []*resourceapi.ResourceSlice{mixed}, wantErr: "different NVLink domains"},
		"older generation":  {slices: []*resourceapi.ResourceSlice{nodeSlice("n", domainB, 1), nodeSlice("n", domainA, 2)}, want: domainA},
		"other node":        {slices: []*resourceapi.ResourceSlice{nodeSlice("m", domainA, 1)}},
		"not a label value": {slices: []*resourceapi.ResourceSlice{nodeSlice("n", "a/b", 1)}, wantErr: "not a valid label value"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := NodeDomain(driver, "n", tc.slices)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "node n") {
					t.Fatalf("err %v, want one naming node n and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NodeDomain = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// start runs the publisher on a fake API server holding objects.
func start(t *testing.T, objects ...runtime.Object) (context.Context, *fake.Clientset) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cs := gpudratest.SliceClientset(objects...)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DriverName: driver, Client: cs, OwnerClass: "nvlink-channel.gpudra.io"})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ctx, cs
}

// until waits for cond, failing the test after a generous while.
func until(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func labelOf(ctx context.Context, t *testing.T, cs *fake.Clientset, name string) (string, bool) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Labels[label]
	return v, ok
}

// poolSlices are the cluster-scoped slices of a domain's pool.
func poolSlices(ctx context.Context, t *testing.T, cs *fake.Clientset, domain string) []resourceapi.ResourceSlice {
	t.Helper()
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.Pool.Name == slicebuilder.ChannelPoolName(domain) {
			out = append(out, s)
		}
	}
	return out
}

// poolWrites counts the writes of cluster-scoped (pool) slices among
// actions: creates and updates of slices without a node, and deletes.
func poolWrites(actions []k8stesting.Action) (creates, updates, deletes int) {
	for _, a := range actions {
		if a.GetResource().Resource != "resourceslices" {
			continue
		}
		var obj runtime.Object
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			obj = o.GetObject()
		}
		s, _ := obj.(*resourceapi.ResourceSlice)
		switch a.GetVerb() {
		case "create":
			if s != nil && s.Spec.NodeName == nil {
				creates++
			}
		case "update":
			if s != nil && s.Spec.NodeName == nil {
				updates++
			}
		case "delete", "delete-collection":
			deletes++
		}
	}
	return
}

// TestLabelsAndPools: the label follows the GPUs' attribute, a domain's
// pool appears with its first labelled node and goes with its last, and
// a second node joining a domain writes no slice.
func TestLabelsAndPools(t *testing.T) {
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nvlink-channel.gpudra.io", UID: "class-uid"}}
	ctx, cs := start(t, class,
		node("tray-1", nil), nodeSlice("tray-1", domainA, 1),
		// A stale label on a node without fabric is removed; other
		// labels stay.
		node("h100", map[string]string{label: domainB, "zone": "z1"}), nodeSlice("h100", "", 1),
	)

	until(ctx, t, "tray-1 labelled with domain A", func() bool { v, _ := labelOf(ctx, t, cs, "tray-1"); return v == domainA })
	until(ctx, t, "the stale label removed from h100", func() bool { _, has := labelOf(ctx, t, cs, "h100"); return !has })
	h100, _ := cs.CoreV1().Nodes().Get(ctx, "h100", metav1.GetOptions{})
	if h100.Labels["zone"] != "z1" {
		t.Errorf("h100's other labels changed: %v", h100.Labels)
	}
	until(ctx, t, "domain A's pool", func() bool { return len(poolSlices(ctx, t, cs, domainA)) == 1 })
	slice := poolSlices(ctx, t, cs, domainA)[0]
	if slice.Spec.NodeName != nil || slice.Spec.NodeSelector == nil ||
		slice.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != domainA {
		t.Errorf("pool slice not selecting domain A's nodes: nodeName %v, selector %+v", slice.Spec.NodeName, slice.Spec.NodeSelector)
	}
	if len(slice.Spec.Devices) != slicebuilder.DefaultChannels+1 {
		t.Errorf("%d channels, want %d", len(slice.Spec.Devices), slicebuilder.DefaultChannels+1)
	}
	if refs := slice.OwnerReferences; len(refs) != 1 || refs[0].UID != class.UID || refs[0].Kind != "DeviceClass" {
		t.Errorf("owner references %+v, want the DeviceClass %s", refs, class.Name)
	}
	if len(poolSlices(ctx, t, cs, domainB)) != 0 {
		t.Errorf("a pool for domain B, which no node's GPUs are in")
	}

	// A second tray joins domain A: labelled, and no slice written. A
	// third tray in domain B then shows the pools were recomputed after
	// the second tray's label: its pool is the only write.
	before := len(cs.Actions())
	if _, err := cs.CoreV1().Nodes().Create(ctx, node("tray-2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, nodeSlice("tray-2", domainA, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, "tray-2 labelled with domain A", func() bool { v, _ := labelOf(ctx, t, cs, "tray-2"); return v == domainA })
	if _, err := cs.CoreV1().Nodes().Create(ctx, node("tray-3", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, nodeSlice("tray-3", domainB, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, "domain B's pool", func() bool { return len(poolSlices(ctx, t, cs, domainB)) == 1 })
	if c, u, d := poolWrites(cs.Actions()[before:]); c != 1 || u != 0 || d != 0 {
		t.Errorf("after tray-2 joined domain A and tray-3 domain B: %d pool slice creates, %d updates, %d deletes; want only domain B's create", c, u, d)
	}

	// tray-3 leaves the fabric (its GPUs lose the attribute): its label
	// goes, and with it domain B's pool; domain A's and the nodes' own
	// slices stay.
	if _, err := cs.ResourceV1().ResourceSlices().Update(ctx, nodeSlice("tray-3", "", 2), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, "tray-3's label removed", func() bool { _, has := labelOf(ctx, t, cs, "tray-3"); return !has })
	until(ctx, t, "domain B's pool deleted", func() bool { return len(poolSlices(ctx, t, cs, domainB)) == 0 })
	if len(poolSlices(ctx, t, cs, domainA)) != 1 {
		t.Errorf("domain A's pool went with domain B's")
	}
	for _, n := range []string{"tray-1", "tray-2", "tray-3", "h100"} {
		if _, err := cs.ResourceV1().ResourceSlices().Get(ctx, n+"-gpus", metav1.GetOptions{}); err != nil {
			t.Errorf("node %s's own slice: %v", n, err)
		}
	}
}

// withIMEXReady sets imexReady on every GPU of a node slice.
func withIMEXReady(s *resourceapi.ResourceSlice, ready bool) *resourceapi.ResourceSlice {
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].Attributes[slicebuilder.AttrIMEXReady] = resourceapi.DeviceAttribute{BoolValue: ptr.To(ready)}
	}
	return s
}

// A tray whose IMEX daemon stops answering loses the readiness label that
// the pool selects on, and keeps its domain label (topology for Kueue and
// node selectors) and the pool: new pods holding a channel stay off it,
// single-node work does not. A plugin that does not check the daemon
// publishes no imexReady, and its tray counts as ready.
func TestIMEXReadyLabel(t *testing.T) {
	ctx, cs := start(t,
		node("tray-1", nil), withIMEXReady(nodeSlice("tray-1", domainA, 1), true),
		node("tray-2", nil), nodeSlice("tray-2", domainA, 1),
		node("h100", nil), nodeSlice("h100", "", 1),
	)
	readyLabel := slicebuilder.IMEXReadyLabel(driver)
	readyOf := func(name string) string {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels[readyLabel]
	}
	until(ctx, t, "tray-1 and tray-2 ready", func() bool { return readyOf("tray-1") == "true" && readyOf("tray-2") == "true" })
	until(ctx, t, "domain A's pool", func() bool { return len(poolSlices(ctx, t, cs, domainA)) == 1 })
	sel := poolSlices(ctx, t, cs, domainA)[0].Spec.NodeSelector
	if want := slicebuilder.ChannelPoolSelector(driver, domainA); !equality.Semantic.DeepEqual(sel, want) {
		t.Errorf("pool selector %+v, want %+v", sel, want)
	}
	if readyOf("h100") != "" {
		t.Errorf("h100, in no domain, is labelled IMEX-ready")
	}

	// tray-1's daemon stops answering.
	if _, err := cs.ResourceV1().ResourceSlices().Update(ctx, withIMEXReady(nodeSlice("tray-1", domainA, 1), false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, "tray-1's readiness label removed", func() bool { return readyOf("tray-1") == "" })
	if v, _ := labelOf(ctx, t, cs, "tray-1"); v != domainA {
		t.Errorf("tray-1's domain label is %q, want it kept (%s)", v, domainA)
	}
	if len(poolSlices(ctx, t, cs, domainA)) != 1 {
		t.Errorf("domain A's pool went when one tray's daemon stopped answering")
	}

	// It answers again.
	if _, err := cs.ResourceV1().ResourceSlices().Update(ctx, withIMEXReady(nodeSlice("tray-1", domainA, 1), true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, "tray-1 ready again", func() bool { return readyOf("tray-1") == "true" })
}
