//go:build e2e && multinode

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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/simulate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// migSparesConfigMap is the chart's ConfigMap of the nodes that keep a MIG
// spare (templates/mig-spares.yaml).
const migSparesConfigMap = releaseName + "-mig-spares"

// profileLabel is the label the multi-node local cluster (node.sh) puts on
// each node: the fake machine it runs.
const profileLabel = "gpudra.io/e2e-profile"

// mnode is one node of the multi-node cluster.
type mnode struct {
	name, profile string
	devices       int // what its plugin publishes
}

// menv is the suite's environment on several nodes.
type menv struct {
	*env
	nodes []mnode
}

func (m *menv) nodesOf(profile string) []mnode {
	var out []mnode
	for _, n := range m.nodes {
		if n.profile == profile {
			out = append(out, n)
		}
	}
	return out
}

// TestMultiNode runs the scenarios that need several nodes, on one
// installation of the chart across all of them: placement by devices, a
// node losing its plugin, gang scheduling, a PodGroup claim on one NVLink
// island, multi-node NVLink domains on the fake GB200 trays, Kueue quotas,
// priority preemption and a rolling upgrade across the nodes. Each
// scenario cleans up after itself; uninstalling the chart at the end must
// take the NVLink channel pools with it.
func TestMultiNode(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	defer writeReport(e)
	m := &menv{env: e}
	m.discoverNodes(ctx, t)

	e.prepareNamespaces(ctx, t)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e.deleteNamespace(cctx, testNS)
		_, _ = run(cctx, e.helm, e.helmArgs("uninstall", releaseName, "-n", systemNS, "--wait")...)
		// The channel pools go with the chart (their slices are owned by
		// its nvlink-channel DeviceClass).
		if len(m.nodesOf(trayProfile)) > 0 {
			if err := m.channelPoolsGone(cctx); err != nil {
				t.Error(err)
			}
		}
		_ = e.cs.CoreV1().Namespaces().Delete(cctx, systemNS, metav1.DeleteOptions{})
	})
	if !t.Run("InstallOnEveryNode", func(t *testing.T) { m.install(ctx, t) }) {
		t.FailNow()
	}
	t.Run("PlacementByDevices", func(t *testing.T) { m.placementByDevices(ctx, t) })
	t.Run("NodeLosesPlugin", func(t *testing.T) { m.nodeLosesPlugin(ctx, t) })
	t.Run("GangAllOrNothing", func(t *testing.T) { m.gangAllOrNothing(ctx, t) })
	t.Run("PodGroupClaimOneIsland", func(t *testing.T) { m.podGroupClaimOneIsland(ctx, t) })
	t.Run("NVLinkDomains", func(t *testing.T) { m.nvlinkDomains(ctx, t) })
	t.Run("KueueQuota", func(t *testing.T) { m.kueueQuota(ctx, t) })
	t.Run("PriorityPreemption", func(t *testing.T) { m.priorityPreemption(ctx, t) })
	t.Run("RollingUpgradeAcrossNodes", func(t *testing.T) { m.rollingUpgradeAcrossNodes(ctx, t) })
}

// discoverNodes reads the cluster's nodes and the fake machine of each.
func (m *menv) discoverNodes(ctx context.Context, t *testing.T) {
	list, err := m.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		p := n.Labels[profileLabel]
		if p == "" {
			t.Fatalf("node %s has no %s label: not the multi-node local cluster (make e2e-multinode)", n.Name, profileLabel)
		}
		m.nodes = append(m.nodes, mnode{name: n.Name, profile: p})
	}
	slices.SortFunc(m.nodes, func(a, b mnode) int { return strings.Compare(a.name, b.name) })
	if want, _ := strconv.Atoi(getenv("GPUDRA_E2E_NODES", "0")); want > 0 && len(m.nodes) != want {
		t.Fatalf("%d nodes, want %d", len(m.nodes), want)
	}
	if len(m.nodesOf("dgx-h100")) < 2 || len(m.nodesOf("mixed")) < 1 {
		t.Fatalf("nodes %v: the scenarios need two dgx-h100 nodes and a mixed one", m.nodes)
	}
	if len(m.nodesOf(trayProfile)) < nvlinkGang+1 {
		t.Fatalf("nodes %v: the NVLink scenarios need at least %d %s trays in two domains (make e2e-multinode's default GPUDRA_LC_PROFILES)", m.nodes, nvlinkGang+1, trayProfile)
	}
	t.Logf("nodes: %v", m.nodes)
}

// publishedCount is how many devices the plugin publishes on a node of a
// profile with the spares gpudra-controller assigned it (the chart's
// default, migSpareGPUs: fleet), from the same plugin run in-process.
func (m *menv) publishedCount(ctx context.Context, t *testing.T, node, profile string, spares int) int {
	t.Helper()
	opts := simulate.Options{NodeName: node, DriverName: m.driver, Profile: profile}
	if spares > 0 {
		// What a plugin in fleet mode publishes with n assigned.
		opts.SpareGPUs = slicebuilder.SpareGPUs{N: spares}
	} else {
		// Fleet mode with no entry for the node.
		opts.SpareGPUs, opts.Namespace, opts.SparesConfigMap = slicebuilder.SpareGPUs{Fleet: true}, systemNS, migSparesConfigMap
	}
	sl := simulatedSlices(ctx, t, opts)
	return countDevices(sl, func(s *resourceapi.ResourceSlice) int { return len(s.Spec.Devices) })
}

// spareNodes is what gpudra-controller assigned in the chart's ConfigMap
// of MIG spares: spare GPUs by node.
func (m *menv) spareNodes(ctx context.Context) (map[string]int, error) {
	cm, err := m.cs.CoreV1().ConfigMaps(systemNS).Get(ctx, migSparesConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for node, v := range cm.Data {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s: node %s: %q is not a number", migSparesConfigMap, node, v)
		}
		out[node] = n
	}
	return out, nil
}

// nodeSlices are the driver's ResourceSlices on one node.
func (m *menv) nodeSlices(ctx context.Context, node string) ([]resourceapi.ResourceSlice, error) {
	saved := m.node
	m.node = node
	defer func() { m.node = saved }()
	return m.slices(ctx)
}

// install installs the chart once; every node runs its plugin, each
// publishing what its own machine has.
func (m *menv) install(ctx context.Context, t *testing.T) {
	start := time.Now()
	args := m.helmArgs(append([]string{"install", releaseName, m.chart, "-n", systemNS, "--create-namespace", "--wait", "--timeout", "3m"}, m.chartValues()...)...)
	if _, err := run(ctx, m.helm, args...); err != nil {
		t.Fatal(err)
	}
	// The spares across the fleet (docs/mig.md): the controller keeps one
	// on two of the nodes (5% rounds up to one node, and the floor is
	// two), and every node publishes what its assignment says.
	want := map[[2]string]int{}
	var spares map[string]int
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		if spares, err = m.spareNodes(ctx); err != nil || len(spares) != min(2, len(m.nodes)) {
			return false, err
		}
		for i, n := range m.nodes {
			key := [2]string{n.name, strconv.Itoa(spares[n.name])}
			if _, ok := want[key]; !ok {
				want[key] = m.publishedCount(ctx, t, n.name, n.profile, spares[n.name])
			}
			m.nodes[i].devices = want[key]
			sl, err := m.nodeSlices(ctx, n.name)
			if err != nil {
				return false, err
			}
			if countDevices(sl, func(s resourceapi.ResourceSlice) int { return len(s.Spec.Devices) }) != m.nodes[i].devices {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("not every node published its devices %v with the spares the controller assigned (%v): %v", m.nodes, spares, err)
	}
	record(t, fmt.Sprintf("plugin: helm install → ResourceSlices of %d nodes published, spares assigned", len(m.nodes)), time.Since(start))
	pods := m.readyPluginPods(ctx, t)
	for _, n := range m.nodes {
		t.Logf("node %s (%s): plugin pod %s, %d devices, %d spare GPUs assigned", n.name, n.profile, pods[n.name].Name, n.devices, spares[n.name])
	}
}

// readyPluginPods waits until every node has exactly one Ready plugin pod
// (other than the excluded UIDs) and returns them by node.
func (m *menv) readyPluginPods(ctx context.Context, t *testing.T, exclude ...string) map[string]v1.Pod {
	t.Helper()
	var out map[string]v1.Pod
	err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := m.pluginPods(ctx)
		if err != nil {
			return false, err
		}
		out = map[string]v1.Pod{}
		count := map[string]int{}
		for _, p := range pods {
			if contains(exclude, string(p.UID)) || p.DeletionTimestamp != nil || !podReady(&p) {
				continue
			}
			out[p.Spec.NodeName] = p
			count[p.Spec.NodeName]++
		}
		for _, n := range m.nodes {
			if count[n.name] != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("not one ready plugin pod per node: %v", err)
	}
	return out
}

// pod is a test pod with claims that may go to any node (nodeSelector
// nil) or to the nodes the selector names.
func (m *menv) pod(name string, nodeSelector map[string]string, claims ...claimRef) *v1.Pod {
	p := m.gpuPod(name, claims...)
	p.Spec.NodeSelector = nodeSelector
	return p
}

func onNode(node string) map[string]string { return map[string]string{"kubernetes.io/hostname": node} }

// cleanup deletes the pods when the scenario ends, however it ends: a
// scenario that fails half-way must not leave GPUs taken for the next.
func (m *menv) cleanup(t *testing.T, pods ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, p := range pods {
			_ = m.cs.CoreV1().Pods(testNS).Delete(ctx, p, metav1.DeleteOptions{})
		}
		for _, p := range pods {
			_ = m.waitPodGone(ctx, p)
		}
	})
}

// whereIs returns the node a pod runs on and the devices its claim got,
// checking that the pod, the claim's allocation and the devices' pools
// agree on the node.
func (m *menv) whereIs(ctx context.Context, t *testing.T, pod, claimName string) (string, []device) {
	t.Helper()
	p, err := m.cs.CoreV1().Pods(testNS).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := m.podClaims(ctx, t, pod)[claimName]
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s of pod %s is not allocated", claim.Name, pod)
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Pool != p.Spec.NodeName {
			t.Errorf("pod %s runs on %s, but its claim got %s/%s", pod, p.Spec.NodeName, r.Pool, r.Device)
		}
	}
	return p.Spec.NodeName, m.allocatedOn(ctx, t, p.Spec.NodeName, claim)
}

// allocatedOn is allocated() for a claim whose devices are on node.
func (m *menv) allocatedOn(ctx context.Context, t *testing.T, node string, claim *resourceapi.ResourceClaim) []device {
	t.Helper()
	saved := m.node
	m.node = node
	defer func() { m.node = saved }()
	return m.allocated(ctx, t, claim)
}

func (m *menv) profileOf(node string) string {
	for _, n := range m.nodes {
		if n.name == node {
			return n.profile
		}
	}
	return ""
}

func intAttr(d device, name resourceapi.QualifiedName) int64 {
	return ptr.Deref(d.attrs[name].IntValue, -1)
}

func strAttr(d device, name resourceapi.QualifiedName) string {
	return ptr.Deref(d.attrs[name].StringValue, "")
}

// placementByDevices: the scheduler puts each claim on the node that has
// its devices: an eight-GPU NVLink island on a DGX (the mixed node's
// islands have four GPUs), the L4 on the mixed node, and a pod with the L4
// and a MIG partition on the mixed node too, the partition created there
// (a pod's claims are allocated together on one node).
func (m *menv) placementByDevices(ctx context.Context, t *testing.T) {
	mig := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig-1g.10gb.gpudra.io"},
	}}}}
	island := m.gpuRequest(8)
	island.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(m.driver + "/nvlinkGroup"))}}
	m.cleanup(t, "place-island", "place-l4", "place-mig")
	m.createTemplate(ctx, t, "place-mig", mig)
	m.createTemplate(ctx, t, "place-island", island)
	m.createTemplate(ctx, t, "place-l4", m.gpuRequest(1, "device.attributes['"+m.driver+"'].productName == 'NVIDIA L4'"))
	// The partition beside the L4 needs a spare on the mixed node. If the
	// controller keeps the fleet's two on the DGX nodes (which have more
	// free GPUs; which nodes it chose at install depends on which plugins
	// had published by its first recompute, and it does not move them),
	// it gives the mixed node one for the Pending pod that fits only there
	// (docs/mig.md, "Spares across the fleet").
	before, err := m.spareNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mixed := m.nodesOf("mixed")[0].name
	start := time.Now()
	m.startPod(ctx, t, m.pod("place-mig", nil, claimRef{name: "gpu", template: "place-l4"}, claimRef{name: "mig", template: "place-mig"}))
	if before[mixed] == 0 {
		record(t, "controller: a spare for a Pending partition claim → pod Running", time.Since(start))
	} else {
		t.Logf("the mixed node %s kept a spare already (%v): the partition took it", mixed, before)
	}
	node, devs := m.whereIs(ctx, t, "place-mig", "gpu")
	if m.profileOf(node) != "mixed" || len(devs) != 1 || strAttr(devs[0], "productName") != "NVIDIA L4" {
		t.Errorf("L4: node %s (%s), devices %v; want the mixed node's L4", node, m.profileOf(node), devs)
	}
	migNode, part := m.whereIs(ctx, t, "place-mig", "mig")
	if migNode != node || len(part) != 1 || strAttr(part[0], "profile") != "1g.10gb" {
		t.Errorf("MIG partition of the pod with the L4: node %s, devices %v; want a 1g.10gb partition on %s", migNode, part, node)
	}
	m.deletePods(ctx, t, "place-mig")

	m.startPod(ctx, t, m.pod("place-island", nil, claimRef{name: "gpu", template: "place-island"}))
	m.startPod(ctx, t, m.pod("place-l4", nil, claimRef{name: "gpu", template: "place-l4"}))
	node, devs = m.whereIs(ctx, t, "place-l4", "gpu")
	if m.profileOf(node) != "mixed" || len(devs) != 1 || strAttr(devs[0], "productName") != "NVIDIA L4" {
		t.Errorf("L4: node %s (%s), devices %v; want the mixed node's L4", node, m.profileOf(node), devs)
	}
	m.deletePods(ctx, t, "place-l4")
	node, devs = m.whereIs(ctx, t, "place-island", "gpu")
	groups := map[int64]bool{}
	for _, d := range devs {
		groups[intAttr(d, "nvlinkGroup")] = true
	}
	if m.profileOf(node) != "dgx-h100" || len(devs) != 8 || len(groups) != 1 {
		t.Errorf("8-GPU island: node %s (%s), %d devices on NVLink groups %v; want 8 GPUs of one island of a DGX", node, m.profileOf(node), len(devs), groups)
	}
	assertSees(t, "place-island", m.whatPodSees(ctx, t, "place-island"), devs)
	m.deletePods(ctx, t, "place-island")
}

// setNodeHasGPUs adds or removes the label the chart's node affinity asks
// for: without it, the DaemonSet controller takes the plugin off the node.
func (m *menv) setNodeHasGPUs(ctx context.Context, t *testing.T, node string, has bool) {
	t.Helper()
	value := `null`
	if has {
		value = `"true"`
	}
	patch := []byte(`{"metadata":{"labels":{"nvidia.com/gpu.present":` + value + `}}}`)
	if _, err := m.cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeLosesPlugin: when a DGX loses its plugin, the kubelet withdraws its
// ResourceSlices and the scheduler stops sending claims there: with the
// other DGX busy, an eight-GPU island claim waits rather than landing on
// the node that cannot prepare it. When the plugin is back the pod goes
// there.
func (m *menv) nodeLosesPlugin(ctx context.Context, t *testing.T) {
	dgx := m.nodesOf("dgx-h100")
	lost, busy := dgx[0].name, dgx[1].name
	island := m.gpuRequest(8)
	island.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(m.driver + "/nvlinkGroup"))}}
	m.cleanup(t, "lost-busy", "lost-waits")
	m.createTemplate(ctx, t, "lost-island", island)
	m.startPod(ctx, t, m.pod("lost-busy", onNode(busy), claimRef{name: "gpu", template: "lost-island"}))

	start := time.Now()
	m.setNodeHasGPUs(ctx, t, lost, false)
	restored := false
	defer func() {
		if !restored {
			m.setNodeHasGPUs(ctx, t, lost, true)
		}
	}()
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		sl, err := m.nodeSlices(ctx, lost)
		return err == nil && len(sl) == 0, err
	}); err != nil {
		t.Fatalf("node %s's ResourceSlices not withdrawn after its plugin went: %v", lost, err)
	}
	record(t, "node loses its plugin → its ResourceSlices withdrawn", time.Since(start))

	if _, err := m.cs.CoreV1().Pods(testNS).Create(ctx, m.pod("lost-waits", nil, claimRef{name: "gpu", template: "lost-island"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := m.waitUnschedulable(ctx, t, "lost-waits")
	t.Logf("with %s's plugin gone and %s busy: %s", lost, busy, msg)
	if p, err := m.cs.CoreV1().Pods(testNS).Get(ctx, "lost-waits", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod scheduled to %q with no node able to prepare its claim (%v)", p.Spec.NodeName, err)
	}

	start = time.Now()
	m.setNodeHasGPUs(ctx, t, lost, true)
	restored = true
	m.waitRunning(ctx, t, "lost-waits")
	record(t, "plugin back on the node → waiting 8-GPU pod Running there", time.Since(start))
	if node, _ := m.whereIs(ctx, t, "lost-waits", "gpu"); node != lost {
		t.Errorf("the waiting pod went to %s, want %s (the only node with a free island)", node, lost)
	}
	m.readyPluginPods(ctx, t)
	m.deletePods(ctx, t, "lost-busy", "lost-waits")
}

// rollingUpgradeAcrossNodes: helm upgrade replaces the plugin on every
// node while pods run on each of them (on a tray, with an IMEX channel
// too); no pod restarts, no claim changes or loses its CDI spec, every
// tray's IMEX daemon keeps running and its node stays imex-ready, and new
// pods still start on every node.
func (m *menv) rollingUpgradeAcrossNodes(ctx context.Context, t *testing.T) {
	m.createTemplate(ctx, t, "roll", m.gpuRequest(1))
	m.createTemplate(ctx, t, "roll-channel", channelRequest())
	type held struct {
		pod     string
		node    string
		before  running
		devs    []device
		claim   *resourceapi.ResourceClaim
		channel *resourceapi.ResourceClaim // on a tray
	}
	var pods []held
	for _, n := range m.nodes {
		m.cleanup(t, "roll-"+n.name, "roll-after-"+n.name)
	}
	trays := map[string]int{} // tray → its IMEX daemon's PID
	for _, n := range m.nodesOf(trayProfile) {
		trays[n.name] = imexDaemonPID(t, n.name)
		m.cleanup(t, inspectorOn(n.name))
		m.startInspectorOn(ctx, t, n.name)
	}
	for _, n := range m.nodes {
		name := "roll-" + n.name
		claims := []claimRef{{name: "gpu", template: "roll"}}
		if _, tray := trays[n.name]; tray {
			claims = append(claims, claimRef{name: "nvlink", template: "roll-channel"})
		}
		m.startPod(ctx, t, m.pod(name, onNode(n.name), claims...))
		byName := m.podClaims(ctx, t, name)
		claim := byName["gpu"]
		pods = append(pods, held{pod: name, node: n.name, before: m.runningState(ctx, t, name), devs: m.allocatedOn(ctx, t, n.name, claim), claim: claim, channel: byName["nvlink"]})
	}
	old := m.readyPluginPods(ctx, t)
	var oldUIDs []string
	for _, p := range old {
		oldUIDs = append(oldUIDs, string(p.UID))
	}
	start := time.Now()
	args := m.helmArgs(append(append([]string{"upgrade", releaseName, m.chart, "-n", systemNS, "--wait", "--timeout", "5m"}, m.chartValues()...),
		"--set-string", "kubeletPlugin.podAnnotations.gpudra-e2e/rollout="+start.Format("150405"))...)
	if _, err := run(ctx, m.helm, args...); err != nil {
		t.Fatal(err)
	}
	m.readyPluginPods(ctx, t, oldUIDs...)
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := m.pluginPods(ctx)
		return err == nil && len(list) == len(m.nodes), err
	}); err != nil {
		t.Errorf("old plugin pods not gone: %v", err)
	}
	record(t, fmt.Sprintf("helm upgrade → new plugin pods alone on %d nodes", len(m.nodes)), time.Since(start))
	for _, h := range pods {
		saved := m.node
		m.node = h.node // the inspector's view is per node: check through the claim and the pod
		if after := m.runningState(ctx, t, h.pod); after != h.before {
			t.Errorf("pod %s on %s was disturbed: %+v, before %+v", h.pod, h.node, after, h.before)
		}
		claim, err := m.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, h.claim.Name, metav1.GetOptions{})
		if err != nil || claim.UID != h.claim.UID || claim.Status.Allocation == nil ||
			fmt.Sprint(claim.Status.Allocation.Devices.Results) != fmt.Sprint(h.claim.Status.Allocation.Devices.Results) {
			t.Errorf("claim %s of pod %s changed or went during the upgrade (%v)", h.claim.Name, h.pod, err)
		}
		assertSees(t, h.pod, m.whatPodSees(ctx, t, h.pod), h.devs)
		m.node = saved
		if h.channel == nil {
			continue
		}
		channel, err := m.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, h.channel.Name, metav1.GetOptions{})
		if err != nil || channel.UID != h.channel.UID || channel.Status.Allocation == nil ||
			fmt.Sprint(channel.Status.Allocation.Devices.Results) != fmt.Sprint(h.channel.Status.Allocation.Devices.Results) {
			t.Errorf("channel claim %s of pod %s changed or went during the upgrade (%v)", h.channel.Name, h.pod, err)
		}
		if specs := m.cdiSpecsOn(ctx, t, h.node, string(h.channel.UID)); len(specs) != 1 {
			t.Errorf("tray %s after the upgrade: CDI specs of the channel claim of pod %s %v, want one", h.node, h.pod, specs)
		}
	}
	for tray, pid := range trays {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("tray %s: its IMEX daemon (pid %d) is gone after the upgrade: %v", tray, pid, err)
		}
		if label, published, _, err := m.trayIMEX(ctx, tray); err != nil || label != "true" || fmt.Sprint(published) != "[true]" {
			t.Errorf("tray %s after the upgrade: label %s=%q, imexReady %v (%v); want true", tray, slicebuilder.IMEXReadyLabel(m.driver), label, published, err)
		}
	}
	for _, n := range m.nodes {
		name := "roll-after-" + n.name
		m.startPod(ctx, t, m.pod(name, onNode(n.name), claimRef{name: "gpu", template: "roll"}))
		if node, _ := m.whereIs(ctx, t, name, "gpu"); node != n.name {
			t.Errorf("pod %s on %s, want %s", name, node, n.name)
		}
	}
	var names []string
	for _, n := range m.nodes {
		names = append(names, "roll-"+n.name, "roll-after-"+n.name)
	}
	for tray := range trays {
		names = append(names, inspectorOn(tray))
	}
	m.deletePods(ctx, t, names...)
}

// ---- examples -------------------------------------------------------------

// exampleDir holds the training examples the e2e suite applies.
var exampleDir = filepath.Join("..", "deviceclasses", "examples", "training")

// applyExample applies one of the training examples in the test namespace:
// namespaced objects move to it, and containers run the suite's busybox
// script instead of CUDA tools. edit may change each object (a map of the
// decoded YAML) before it is applied, or empty it to leave it out.
func (m *menv) applyExample(ctx context.Context, t *testing.T, file string, edit func(obj map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exampleDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		if _, ok := meta["namespace"]; ok {
			meta["namespace"] = testNS
		}
		m.runScript(obj)
		if edit != nil {
			if edit(obj); len(obj) == 0 {
				continue
			}
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	f := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(f, []byte(strings.Join(out, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kubectlRun(ctx, "apply", "-f", f); err != nil {
		t.Fatalf("apply %s: %v", file, err)
	}
}

// podSpecOf returns the pod spec of a Pod or of a Job's pod template.
func podSpecOf(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	switch obj["kind"] {
	case "Pod":
		return spec
	case "Job":
		tmpl, _ := spec["template"].(map[string]any)
		s, _ := tmpl["spec"].(map[string]any)
		return s
	}
	return nil
}

// runScript makes a pod spec's containers run the suite's script (print
// what they see, sleep) in its image.
func (m *menv) runScript(obj map[string]any) {
	spec := podSpecOf(obj)
	if spec == nil {
		return
	}
	spec["terminationGracePeriodSeconds"] = 1
	ctrs, _ := spec["containers"].([]any)
	for _, c := range ctrs {
		ctr := c.(map[string]any)
		ctr["image"] = m.image
		ctr["imagePullPolicy"] = string(m.pullPolicy)
		ctr["command"] = []any{"sh", "-c", script}
	}
}

// withNodeSelector is an edit that restricts pods to nodes with a label.
func withNodeSelector(sel map[string]string) func(map[string]any) {
	return func(obj map[string]any) {
		if spec := podSpecOf(obj); spec != nil {
			ns := map[string]any{}
			for k, v := range sel {
				ns[k] = v
			}
			spec["nodeSelector"] = ns
		}
	}
}

// deleteExample deletes what applyExample applied (and waits for pods).
func (m *menv) deleteExample(ctx context.Context, t *testing.T, kinds string, selector string) {
	t.Helper()
	args := []string{"-n", testNS, "delete", kinds, "--cascade=foreground", "--wait=true", "--timeout=2m"}
	if selector != "" {
		args = append(args, "-l", selector)
	} else {
		args = append(args, "--all")
	}
	if _, err := m.kubectlRun(ctx, args...); err != nil {
		t.Errorf("delete %s: %v", kinds, err)
	}
}
