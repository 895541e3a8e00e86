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

package clusterstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

const driver = "gpu.gpudra.io"

// fakeSlices are what the plugin publishes on one fake node.
func fakeSlices(t *testing.T, profile string, pool fakenodes.Pool) []resourceapi.ResourceSlice {
	t.Helper()
	sl, err := fakenodes.SlicesOf(context.Background(), profile, 1, driver, pool)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]resourceapi.ResourceSlice, len(sl))
	for i, s := range sl {
		out[i] = *s
	}
	return out
}

// claim is an allocated claim of the given devices on node-1, reserved for
// pod, with the plugin's status.devices for those in statuses.
func claim(ns, name, pod string, results []resourceapi.DeviceRequestAllocationResult, statuses ...*configapi.DeviceStatus) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	if pod != "" {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod)}}
	}
	for i, st := range statuses {
		if st == nil {
			continue
		}
		data, _ := json.Marshal(st)
		r := results[i]
		c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device, ShareID: (*string)(r.ShareID),
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared"}},
			Data:       &runtime.RawExtension{Raw: data}})
	}
	return c
}

func result(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: "node-1", Device: device}
}

func TestBuild(t *testing.T) {
	// Every free GPU publishes its placements (--mig-spare-gpus=all): the
	// room of each GPU is counted from what its node publishes, and the
	// partitioned gpu-1 publishes its placements under any setting.
	sl := fakeSlices(t, "dgx-h100", fakenodes.Pool{SpareGPUs: slicebuilder.SpareGPUs{All: true}})
	// gpu-7 gets the health taint, as the plugin taints a GPU after an XID.
	for i := range sl {
		for j := range sl[i].Spec.Devices {
			if d := &sl[i].Spec.Devices[j]; d.Name == "gpu-7" {
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: slicebuilder.UnhealthyTaintKey(driver), Value: "unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
		}
	}
	mig := configapi.NewDeviceStatus()
	mig.UUID, mig.MIG = "MIG-1234", &configapi.MigDeviceStatus{Profile: "3g.40gb", PlacementStart: 0, PlacementSize: 4}
	whole := configapi.NewDeviceStatus()
	whole.UUID, whole.Sharing = "GPU-whole", &configapi.SharingStatus{Strategy: configapi.TimeSlicingStrategy, TimeSliceInterval: configapi.LongTimeSlice}
	admin := result("gpu-0-monitor")
	admin.AdminAccess = ptr.To(true)
	claims := []resourceapi.ResourceClaim{
		claim("team-a", "train", "trainer-0", []resourceapi.DeviceRequestAllocationResult{result("gpu-0")}, whole),
		claim("team-b", "notebook", "nb", []resourceapi.DeviceRequestAllocationResult{result("gpu-1-mig-3g40gb-0")}, mig),
		claim("monitoring", "dcgm", "dcgm-exporter", []resourceapi.DeviceRequestAllocationResult{admin}),
		// Another driver's claim and an unallocated one count for nothing.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "pending"}},
		claim("x", "other-driver", "p", []resourceapi.DeviceRequestAllocationResult{{Request: "nic", Driver: "nic.example.com", Pool: "node-1", Device: "gpu-2"}}),
	}
	rep := Build(sl, claims, Options{Driver: driver})
	if len(rep.Nodes) != 1 || rep.Nodes[0].Name != "node-1" || len(rep.Nodes[0].GPUs) != 8 {
		t.Fatalf("nodes: %+v", rep.Nodes)
	}
	gpus := rep.Nodes[0].GPUs
	g0, g1, g2, g7 := gpus[0], gpus[1], gpus[2], gpus[7]
	if g0.State != StateWhole || g0.Available || len(g0.Holders) != 1 || g0.Holders[0].Name() != "team-a/train" || g0.Holders[0].Pods[0] != "trainer-0" || !g0.Holders[0].Prepared {
		t.Errorf("gpu-0: %+v", g0)
	}
	if g0.Holders[0].Status == nil || g0.Holders[0].Status.UUID != "GPU-whole" {
		t.Errorf("gpu-0's holder lacks the plugin's status: %+v", g0.Holders[0])
	}
	if len(g0.Monitors) != 1 || g0.Monitors[0].Name() != "monitoring/dcgm" {
		t.Errorf("gpu-0 monitors: %+v", g0.Monitors)
	}
	if g0.Model != "NVIDIA H100 80GB HBM3" || !strings.HasPrefix(g0.UUID, "GPU-") || g0.Memory == nil || g0.Memory.Cmp(resource.MustParse("79Gi")) < 0 {
		t.Errorf("gpu-0 description: %+v", g0)
	}
	if g1.State != StatePartitioned || len(g1.Partitions) != 1 || g1.Partitions[0].Profile != "3g.40gb" || g1.Partitions[0].Holder.Status.UUID != "MIG-1234" {
		t.Errorf("gpu-1: %+v", g1)
	}
	// The 3g.40gb at 0 takes memory slices 0-3 and 3 of 7 compute
	// slices: another 3g.40gb (at 4) fits, or three 1g.10gb (4, 5, 6),
	// but no 4g.40gb or 7g.80gb, and only one 1g.10gb+me (media engines).
	if g1.Room["7g.80gb"] != 0 || g1.Room["4g.40gb"] != 0 || g1.Room["3g.40gb"] != 1 || g1.Room["1g.10gb"] != 3 || g1.Room["1g.10gb+me"] != 1 {
		t.Errorf("gpu-1 room: %v", g1.Room)
	}
	// A free H100: seven 1g.10gb (the counters allow no more), one 7g.80gb.
	if g2.Room["1g.10gb"] != 7 || g2.Room["7g.80gb"] != 1 || g2.Room["2g.20gb"] != 3 || g2.Room["1g.10gb+me"] != 1 {
		t.Errorf("gpu-2 room: %v", g2.Room)
	}
	if g2.State != StateFree || !g2.Available || len(g2.Holders) != 0 {
		t.Errorf("gpu-2 (held only by another driver's claim): %+v", g2)
	}
	if g7.Healthy || g7.Available || len(g7.Taints) != 1 || g7.Taints[0] != "gpu.gpudra.io/unhealthy=unhealthy:NoSchedule" {
		t.Errorf("gpu-7: %+v", g7)
	}
	if free := rep.Nodes[0].Free; free.GPUs != 5 || free.Partitions["1g.10gb"] != 3+5*7 {
		t.Errorf("free: %+v", free)
	}

	var buf bytes.Buffer
	if err := rep.WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		"node-1  gpu-0  NVIDIA H100 80GB HBM3  ok         whole",
		"team-a/train",
		"trainer-0",
		"TimeSlicing Long",
		"gpu-1-mig-3g40gb-0",
		"MIG-1234",
		"gpu-0 (monitor)",
		"unhealthy",
		"FREE\nnode-1: 5 whole GPUs; or MIG partitions of one profile: 1g.10gb 38, 1g.10gb+me 6,",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	// -n team-a: other namespaces' claims are held, not named.
	rep = Build(sl, claims, Options{Driver: driver, Namespace: "team-a"})
	g1 = rep.Nodes[0].GPUs[1]
	if g1.State != StatePartitioned || g1.Partitions[0].Holder.Name() != "(another namespace)" || g1.Partitions[0].Holder.Status != nil {
		t.Errorf("-n team-a, gpu-1: %+v", g1.Partitions)
	}
	if rep := Build(sl, claims, Options{Driver: driver, Nodes: []string{"node-9"}}); len(rep.Nodes) != 0 {
		t.Errorf("a node filter that matches nothing: %+v", rep.Nodes)
	}
}

// TestBuildShares: on a pool with consumable capacity, shares of a GPU
// are listed with their memory, and what is left of the GPU is free.
func TestBuildShares(t *testing.T) {
	sl := fakeSlices(t, "dgx-h100", fakenodes.Pool{ConsumableCapacity: true})
	share := func(id string, mem string) resourceapi.DeviceRequestAllocationResult {
		r := result("gpu-3")
		r.ShareID = ptr.To(types.UID(id))
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{slicebuilder.CapMemory: resource.MustParse(mem)}
		return r
	}
	mps := configapi.NewDeviceStatus()
	mps.Sharing = &configapi.SharingStatus{Strategy: configapi.MPSStrategy, PinnedDeviceMemoryLimit: ptr.To(resource.MustParse("20Gi"))}
	claims := []resourceapi.ResourceClaim{
		claim("ns", "a", "pod-a", []resourceapi.DeviceRequestAllocationResult{share("11111111-1111-1111-1111-111111111111", "20Gi")}, mps),
		claim("ns", "b", "pod-b", []resourceapi.DeviceRequestAllocationResult{share("22222222-2222-2222-2222-222222222222", "10Gi")}),
	}
	rep := Build(sl, claims, Options{Driver: driver})
	g := rep.Nodes[0].GPUs[3]
	if g.State != StateShared || !g.Shareable || len(g.Holders) != 2 || g.Holders[0].Memory.String() != "20Gi" || g.Holders[1].Prepared {
		t.Fatalf("gpu-3: %+v", g)
	}
	want := g.Memory.DeepCopy()
	want.Sub(resource.MustParse("30Gi"))
	if g.FreeMemory == nil || g.FreeMemory.Cmp(want) != 0 {
		t.Errorf("free memory of gpu-3: %v, want %v", g.FreeMemory, want.String())
	}
	if free := rep.Nodes[0].Free; free.GPUs != 7 || free.SharedMemory == nil || free.SharedMemory.Cmp(want) != 0 {
		t.Errorf("node free: %+v", free)
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "MPS 20Gi") || !strings.Contains(buf.String(), "on shared GPUs") {
		t.Errorf("text:\n%s", buf.String())
	}
}

// TestWriteTextEscapes: the table shows what cluster objects say, and a
// carriage return or newline in an attribute must not forge a row (nor a
// tab shift the columns, nor an escape sequence reach the terminal): what
// is not printable is escaped.
func TestWriteTextEscapes(t *testing.T) {
	sl := fakeSlices(t, "dgx-a100", fakenodes.Pool{})
	forged := "A100\rnode-1  gpu-9  A100  ok  free  -  -  -\n\x1b[2J"
	for i := range sl {
		for j := range sl[i].Spec.Devices {
			d := &sl[i].Spec.Devices[j]
			if _, ok := d.Attributes[slicebuilder.AttrProductName]; ok {
				d.Attributes[slicebuilder.AttrProductName] = resourceapi.DeviceAttribute{StringValue: ptr.To(forged)}
			}
		}
	}
	rep := Build(sl, nil, Options{Driver: driver})
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") || strings.Contains(out, "gpu-9") && !strings.Contains(out, `\rnode-1`) {
		t.Errorf("a forged attribute reached the output raw:\n%q", out)
	}
	rows := 0
	// A terminal starts a row at a carriage return as at a newline.
	for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if strings.HasPrefix(line, "node-1 ") {
			rows++
		}
	}
	if rows != 8 {
		t.Errorf("%d GPU rows, want 8 (one per GPU of a DGX A100):\n%q", rows, out)
	}
	if !strings.Contains(out, `A100\rnode-1  gpu-9  A100  ok  free  -  -  -\n\x1b[2J`) {
		t.Errorf("the model is not shown escaped:\n%s", out)
	}
}

// A GB200 tray's NVLink domain shows beside what it has free; a DGX H100
// has none.
func TestNVLinkDomain(t *testing.T) {
	for _, tc := range []struct{ profile, domain, line string }{
		{"gb200-tray", "00000001-0000-0000-0000-000000000001.2", "node-1: 4 whole GPUs (NVLink domain 00000001-0000-0000-0000-000000000001.2)\n"},
		{"dgx-h100", "", "node-1: 8 whole GPUs"},
	} {
		rep := Build(fakeSlices(t, tc.profile, fakenodes.Pool{}), nil, Options{Driver: driver})
		if len(rep.Nodes) != 1 || rep.Nodes[0].NVLinkDomain != tc.domain {
			t.Fatalf("%s: nodes %+v", tc.profile, rep.Nodes)
		}
		var b bytes.Buffer
		if err := rep.WriteText(&b, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.line) || (tc.domain == "" && strings.Contains(b.String(), "NVLink domain")) {
			t.Errorf("%s: output lacks %q:\n%s", tc.profile, tc.line, b.String())
		}
	}
}

// An NVLink domain's channel pool is no node: it shows as a domain, with
// its nodes and the channels claims hold, and the node row stays the
// tray's alone.
func TestNVLinkDomainChannels(t *testing.T) {
	const domain = "00000001-0000-0000-0000-000000000001.2"
	pool := slicebuilder.ChannelPoolName(domain)
	claims := []resourceapi.ResourceClaim{
		claim("team-a", "job-1", "worker-0", []resourceapi.DeviceRequestAllocationResult{{Request: "channel", Driver: driver, Pool: pool, Device: "channel-1"}}),
		claim("team-b", "job-2", "worker-0", []resourceapi.DeviceRequestAllocationResult{{Request: "channel", Driver: driver, Pool: pool, Device: "channel-0"}}),
	}
	rep := Build(fakeSlices(t, "gb200-tray", fakenodes.Pool{}), claims, Options{Driver: driver, Namespace: "team-a"})
	if len(rep.Nodes) != 1 || rep.Nodes[0].Name != "node-1" {
		t.Fatalf("nodes %+v, want node-1 alone", rep.Nodes)
	}
	if len(rep.Domains) != 1 {
		t.Fatalf("domains %+v, want one", rep.Domains)
	}
	d := rep.Domains[0]
	if d.Name != domain || !slices.Equal(d.Nodes, []string{"node-1"}) || d.Channels != slicebuilder.DefaultChannels+1 {
		t.Errorf("domain %s, nodes %v, %d channels; want %s, [node-1], %d", d.Name, d.Nodes, d.Channels, domain, slicebuilder.DefaultChannels+1)
	}
	if len(d.Held) != 2 || d.Held[0].Channel != "channel-0" || !d.Held[0].Hidden || d.Held[1].Channel != "channel-1" || d.Held[1].Claim != "job-1" {
		t.Errorf("held %+v, want channel-0 by a claim of another namespace, channel-1 by team-a/job-1", d.Held)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NVLINK DOMAINS\n", domain + ": 1 node(s) node-1; 128 channels, 2 held\n", "  channel-1  team-a/job-1 pods worker-0\n", "  channel-0  (another namespace)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, b.String())
		}
	}
}

// A tray whose plugin says its IMEX daemon is not ready shows so, beside
// its domain and under the domain's channels; one that says ready shows
// that.
func TestIMEXDaemonState(t *testing.T) {
	const domain = "00000001-0000-0000-0000-000000000001.2"
	for _, tc := range []struct {
		ready bool
		want  []string
		not   string
	}{
		{true, []string{"(NVLink domain " + domain + ", IMEX daemon ready)"}, "IMEX daemon not ready on"},
		{false, []string{"(NVLink domain " + domain + ", IMEX daemon not ready)", "  IMEX daemon not ready on node-1: no new pod holding a channel lands there\n"}, "IMEX daemon ready)"},
	} {
		slices := fakeSlices(t, "gb200-tray", fakenodes.Pool{})
		for _, s := range slices {
			for i := range s.Spec.Devices {
				if _, ok := s.Spec.Devices[i].Attributes[slicebuilder.AttrNVLinkDomain]; ok && s.Spec.NodeName != nil {
					s.Spec.Devices[i].Attributes[slicebuilder.AttrIMEXReady] = resourceapi.DeviceAttribute{BoolValue: ptr.To(tc.ready)}
				}
			}
		}
		rep := Build(slices, nil, Options{Driver: driver})
		var b bytes.Buffer
		if err := rep.WriteText(&b, false); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("ready=%v: the text lacks %q:\n%s", tc.ready, want, b.String())
			}
		}
		if strings.Contains(b.String(), tc.not) {
			t.Errorf("ready=%v: the text says %q:\n%s", tc.ready, tc.not, b.String())
		}
	}
}
