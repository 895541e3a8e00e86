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
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The NVLink scenarios run on the fake GB200 trays of the multi-node
// cluster (hack/localcluster/env.sh: three trays in rack A, one in rack
// B, each rack its own NVLink domain), with the channel pools that
// gpudra-controller publishes (docs/nvlink.md). A job asks for one IMEX
// channel for all its workers, as docs/nvlink.md's manifests do: a
// PodGroup claim (this cluster serves the Workload API) beside each
// worker's claim for its tray's four GPUs.

const (
	// trayProfile is the fake machine of the trays.
	trayProfile = "gb200-tray"
	// channelClass is the chart's DeviceClass of the exclusive channels
	// (deviceclasses/nvlink.yaml).
	channelClass = "nvlink-channel.gpudra.io"
	// nvlinkGang is how many trays the gang that fits one domain has:
	// the biggest domain must have that many.
	nvlinkGang = 3
	// completionIndex is the annotation the Job controller puts on each
	// pod of an Indexed Job.
	completionIndex = "batch.kubernetes.io/job-completion-index"
)

// nvlinkScript is script, and the IMEX channel device nodes the container
// has.
const nvlinkScript = `env | sort; echo "DEVICES: $(ls /dev | grep '^nvidia' | tr '\n' ' ')"; ` +
	`echo "CHANNELS: $(ls /dev/nvidia-caps-imex-channels 2>/dev/null | tr '\n' ' ')"; echo READY; exec sleep 3600`

// nvlinkFixture is what the scenarios learn of the cluster's domains.
type nvlinkFixture struct {
	// domains are the tray nodes of each domain, by domain.
	domains map[string][]string
	// domainOf is each tray's domain.
	domainOf map[string]string
	// big is the domain a gang of nvlinkGang trays fits; largest the
	// most trays of any domain.
	big     string
	largest int
	trays   []string
	// channelClaims are the UIDs of every channel claim the scenarios
	// made: none may stay prepared on any tray.
	channelClaims []string
}

// nvlinkDomains runs the NVLink scenarios in order, on one fixture: the
// pools, a gang in one domain (with a plugin restart and a lost worker),
// two jobs in one domain, a gang larger than any domain, a hung IMEX
// daemon, and nothing left.
func (m *menv) nvlinkDomains(ctx context.Context, t *testing.T) {
	fx := m.nvlinkPools(ctx, t, true)
	for _, node := range fx.trays {
		m.cleanup(t, inspectorOn(node))
		m.startInspectorOn(ctx, t, node)
	}
	m.createTemplate(ctx, t, "nvl-channel", channelRequest())
	m.createTemplate(ctx, t, "nvl-tray", m.gpuRequest(4))
	m.createTemplate(ctx, t, "nvl-two", m.gpuRequest(2))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = m.kubectlRun(ctx, "-n", testNS, "delete", "jobs", "-l", "gpudra-e2e=nvlink", "--cascade=foreground", "--wait=true", "--timeout=90s")
		_, _ = m.kubectlRun(ctx, "-n", testNS, "delete", "podgroups", "-l", "gpudra-e2e=nvlink", "--wait=true", "--timeout=60s")
		_, _ = m.kubectlRun(ctx, "-n", testNS, "delete", "resourceclaimtemplates", "nvl-channel", "nvl-tray", "nvl-two", "--ignore-not-found")
	})
	if !t.Run("GangInOneDomain", func(t *testing.T) { m.nvlinkGangInOneDomain(ctx, t, fx) }) {
		return
	}
	t.Run("GangLargerThanAnyDomain", func(t *testing.T) { m.nvlinkGangTooLarge(ctx, t, fx) })
	t.Run("HungDaemon", func(t *testing.T) { m.nvlinkHungDaemon(ctx, t, fx) })
	t.Run("NothingLeft", func(t *testing.T) { m.nvlinkNothingLeft(ctx, t, fx) })
}

// channelRequest is a claim for one exclusive IMEX channel.
func channelRequest() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: channelClass},
	}}}}
}

// nvlinkPools checks what gpudra-controller publishes: every tray labelled
// with the domain its GPUs report, no other node labelled, and one pool
// nvlink/<domain> per domain, fenced by its node selector to the domain's
// nodes, with the shared channel-0 and exclusive channels. need asks that
// the cluster have domains the scenarios can use.
func (m *menv) nvlinkPools(ctx context.Context, t *testing.T, need bool) *nvlinkFixture {
	t.Helper()
	label := slicebuilder.NVLinkDomainLabel(m.driver)
	trays := m.nodesOf(trayProfile)
	var fx *nvlinkFixture
	var problems []string
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		fx = &nvlinkFixture{domains: map[string][]string{}, domainOf: map[string]string{}}
		problems = problems[:0]
		for _, n := range m.nodes {
			node, err := m.cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			sl, err := m.nodeSlices(ctx, n.name)
			if err != nil {
				return false, err
			}
			reported := map[string]bool{}
			for _, s := range sl {
				for _, d := range s.Spec.Devices {
					if a, ok := d.Attributes[slicebuilder.AttrNVLinkDomain]; ok && a.StringValue != nil {
						reported[*a.StringValue] = true
					}
				}
			}
			got := node.Labels[label]
			if n.profile != trayProfile {
				if got != "" || len(reported) > 0 {
					problems = append(problems, fmt.Sprintf("node %s (%s) is in no NVLink fabric, but has label %q and GPUs in domains %v", n.name, n.profile, got, slices.Sorted(maps.Keys(reported))))
				}
				continue
			}
			if len(reported) != 1 || got == "" || !reported[got] {
				problems = append(problems, fmt.Sprintf("tray %s: label %s=%q, its GPUs report domains %v; want one domain, and the label saying it", n.name, label, got, slices.Sorted(maps.Keys(reported))))
				continue
			}
			fx.domainOf[n.name] = got
			fx.domains[got] = append(fx.domains[got], n.name)
			fx.trays = append(fx.trays, n.name)
		}
		all, err := m.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + m.driver})
		if err != nil {
			return false, err
		}
		pools := map[string][]resourceapi.ResourceSlice{}
		for _, s := range all.Items {
			if domain, ok := strings.CutPrefix(s.Spec.Pool.Name, slicebuilder.ChannelPoolPrefix); ok {
				pools[domain] = append(pools[domain], s)
			}
		}
		if want, got := slices.Sorted(maps.Keys(fx.domains)), slices.Sorted(maps.Keys(pools)); fmt.Sprint(want) != fmt.Sprint(got) {
			problems = append(problems, fmt.Sprintf("channel pools for domains %v, want one per domain of the trays %v", got, want))
		}
		for domain, sl := range pools {
			names := map[string]bool{}
			for _, s := range sl {
				if want := slicebuilder.ChannelPoolSelector(m.driver, domain); !equality.Semantic.DeepEqual(s.Spec.NodeSelector, want) {
					problems = append(problems, fmt.Sprintf("pool %s: slice %s has node selector %v, want %v (%s In [%s], the IMEX daemon ready)", s.Spec.Pool.Name, s.Name, s.Spec.NodeSelector, want, label, domain))
				}
				if s.Spec.NodeName != nil || ptr.Deref(s.Spec.AllNodes, false) {
					problems = append(problems, fmt.Sprintf("pool %s: slice %s is for a node or all nodes, want the domain's", s.Spec.Pool.Name, s.Name))
				}
				for _, d := range s.Spec.Devices {
					names[d.Name] = true
				}
			}
			if !names[slicebuilder.ChannelDeviceName(0)] || !names[slicebuilder.ChannelDeviceName(1)] {
				problems = append(problems, fmt.Sprintf("pool %s%s has devices %d, without channel-0 and channel-1", slicebuilder.ChannelPoolPrefix, domain, len(names)))
			}
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Fatalf("gpudra-controller's NVLink domains (%v):\n%s", err, strings.Join(problems, "\n"))
	}
	for d, nodes := range fx.domains {
		slices.Sort(nodes)
		if len(nodes) >= nvlinkGang && (fx.big == "" || len(nodes) > len(fx.domains[fx.big])) {
			fx.big = d
		}
		fx.largest = max(fx.largest, len(nodes))
		t.Logf("NVLink domain %s: trays %v, pool %s%s", d, nodes, slicebuilder.ChannelPoolPrefix, d)
	}
	if need && (len(fx.domains) < 2 || fx.big == "" || len(fx.trays) <= fx.largest || len(trays) != len(fx.trays)) {
		t.Fatalf("trays %v in domains %v: the NVLink scenarios need two domains, one of at least %d trays, and more trays than any domain has (make e2e-multinode's default GPUDRA_LC_PROFILES)", trays, fx.domains, nvlinkGang)
	}
	return fx
}

// requires reports whether every term of a node selector requires
// "label In [value]": the allocation's node selector, which the scheduler
// takes from the pool's.
func requires(sel *v1.NodeSelector, label, value string) bool {
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		return false
	}
	for _, term := range sel.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r v1.NodeSelectorRequirement) bool {
			return r.Key == label && r.Operator == v1.NodeSelectorOpIn && len(r.Values) == 1 && r.Values[0] == value
		}) {
			return false
		}
	}
	return true
}

// nvlinkJob creates a PodGroup and an Indexed Job of n workers, each with
// the group's channel claim and its own claim for a tray's four GPUs
// (docs/nvlink.md, "With the Workload API").
func (m *menv) nvlinkJob(ctx context.Context, t *testing.T, name string, n int32) {
	t.Helper()
	labels := map[string]string{"gpudra-e2e": "nvlink"}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: labels},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: n}},
			// One placement per NVLink domain: without it the scheduler
			// places the gang pod by pod, and its first pod's channel may
			// fence it into a domain too small for it (docs/nvlink.md).
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{
				Key: slicebuilder.NVLinkDomainLabel(m.driver),
			}}},
			ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{{Name: "nvlink", ResourceClaimTemplateName: ptr.To("nvl-channel")}},
		},
	}
	if _, err := m.cs.SchedulingV1beta1().PodGroups(testNS).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
	pod := m.nvlinkPod("", claimRef{name: "gpus", template: "nvl-tray"}, claimRef{name: "nvlink", template: "nvl-channel"})
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(n),
			Parallelism:    ptr.To(n),
			// A worker that is lost is replaced, not the job failed.
			BackoffLimit: ptr.To[int32](6),
			Template:     v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := m.cs.BatchV1().Jobs(testNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
}

// nvlinkPod is a test pod that may run on any node and prints its IMEX
// channels too.
func (m *menv) nvlinkPod(name string, claims ...claimRef) *v1.Pod {
	p := m.pod(name, nil, claims...)
	p.Labels = map[string]string{"gpudra-e2e": "nvlink"}
	p.Spec.Containers[0].Command = []string{"sh", "-c", nvlinkScript}
	return p
}

// channelSeen is what a container printed of its NVLink domain and channel.
type channelSeen struct {
	domain, channel string
	devices         []string // under /dev/nvidia-caps-imex-channels
}

func (m *menv) channelSeenBy(ctx context.Context, t *testing.T, pod string) channelSeen {
	t.Helper()
	var logs string
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		b, err := m.cs.CoreV1().Pods(testNS).GetLogs(pod, &v1.PodLogOptions{Container: "ctr"}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		logs = string(b)
		return strings.Contains(logs, "\nREADY"), nil
	})
	if err != nil {
		t.Fatalf("logs of pod %s: %v (got %q)", pod, err, logs)
	}
	s := parseSeen(logs)
	out := channelSeen{domain: s.env[nodestate.EnvNVLinkDomain], channel: s.env[nodestate.EnvIMEXChannel]}
	for _, line := range strings.Split(logs, "\n") {
		if d, ok := strings.CutPrefix(line, "CHANNELS:"); ok {
			out.devices = strings.Fields(d)
		}
	}
	return out
}

// channelOf is the domain and channel number a claim was allocated.
func channelOf(c *resourceapi.ResourceClaim) (string, int, error) {
	if c.Status.Allocation == nil {
		return "", 0, fmt.Errorf("claim %s is not allocated", c.Name)
	}
	res := c.Status.Allocation.Devices.Results
	if len(res) != 1 {
		return "", 0, fmt.Errorf("claim %s: %d devices allocated, want one channel", c.Name, len(res))
	}
	domain, ok := strings.CutPrefix(res[0].Pool, slicebuilder.ChannelPoolPrefix)
	n, err := strconv.Atoi(strings.TrimPrefix(res[0].Device, "channel-"))
	if !ok || err != nil {
		return "", 0, fmt.Errorf("claim %s got %s/%s, want a channel of an NVLink domain's pool", c.Name, res[0].Pool, res[0].Device)
	}
	return domain, n, nil
}

// groupClaim is the claim made for a PodGroup's claim "nvlink".
func (m *menv) groupClaim(ctx context.Context, t *testing.T, group string) *resourceapi.ResourceClaim {
	t.Helper()
	claim, err := m.groupClaimWithin(ctx, group, time.Minute)
	if err != nil {
		t.Fatalf("PodGroup %s has no claim for its channel: %v", group, err)
	}
	return claim
}

// groupClaimWithin waits at most timeout for the claim of a PodGroup's
// claim "nvlink".
func (m *menv) groupClaimWithin(ctx context.Context, group string, timeout time.Duration) (*resourceapi.ResourceClaim, error) {
	var claim *resourceapi.ResourceClaim
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		pg, err := m.cs.SchedulingV1beta1().PodGroups(testNS).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, st := range pg.Status.ResourceClaimStatuses {
			if st.Name == "nvlink" && st.ResourceClaimName != nil {
				claim, err = m.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{})
				return err == nil, err
			}
		}
		return false, nil
	})
	return claim, err
}

// podClaim is the claim of a pod's template claim, or nil while there is
// none.
func (m *menv) podClaim(ctx context.Context, p *v1.Pod, name string) (*resourceapi.ResourceClaim, error) {
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == name && st.ResourceClaimName != nil {
			return m.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{})
		}
	}
	return nil, nil
}

// assertChannel checks that a running worker sees the channel its claim
// got: the domain and channel in its environment and the channel's device
// node, and that it runs in that domain.
func (m *menv) assertChannel(ctx context.Context, t *testing.T, fx *nvlinkFixture, p v1.Pod, domain string, channel int) {
	t.Helper()
	if got := fx.domainOf[p.Spec.NodeName]; got != domain {
		t.Errorf("worker %s runs on %s, in NVLink domain %q; its channel is of domain %s", p.Name, p.Spec.NodeName, got, domain)
	}
	s := m.channelSeenBy(ctx, t, p.Name)
	want := channelSeen{domain: domain, channel: strconv.Itoa(channel), devices: []string{"channel" + strconv.Itoa(channel)}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("worker %s sees %s=%q, %s=%q, channel devices %v; want %q, %q, %v", p.Name,
			nodestate.EnvNVLinkDomain, s.domain, nodestate.EnvIMEXChannel, s.channel, s.devices, want.domain, want.channel, want.devices)
	}
}

// nvlinkGangInOneDomain: a gang of three workers, a tray each, with one
// channel claim for the group, runs whole in the one domain that has
// three trays, never across two (there are four trays in all), every
// worker seeing the group's channel; the channel is prepared on each of
// its trays. Then, on the running job: a plugin restart on a tray keeps
// its worker and its channel; a lost worker's replacement runs in the same
// domain with the same channel although a tray of the other domain is
// free; and two single-pod jobs, which find room in the other domain
// only, get two different channels of it.
func (m *menv) nvlinkGangInOneDomain(ctx context.Context, t *testing.T, fx *nvlinkFixture) {
	start := time.Now()
	m.nvlinkJob(ctx, t, "nvl-gang", nvlinkGang)
	pods := m.waitJobRunning(ctx, t, "nvl-gang", nvlinkGang, 3*time.Minute)
	record(t, "NVLink: gang of 3 trays, job created → all 3 pods Running", time.Since(start))
	claim := m.groupClaim(ctx, t, "nvl-gang")
	fx.channelClaims = append(fx.channelClaims, string(claim.UID))
	domain, channel, err := channelOf(claim)
	if err != nil {
		t.Fatal(err)
	}
	if domain != fx.big {
		t.Errorf("the gang's channel is of domain %s; only %s has %d trays", domain, fx.big, nvlinkGang)
	}
	if !requires(claim.Status.Allocation.NodeSelector, slicebuilder.NVLinkDomainLabel(m.driver), domain) {
		t.Errorf("claim %s: allocation node selector %v, want it to require the domain %s", claim.Name, claim.Status.Allocation.NodeSelector, domain)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].Resource != "podgroups" {
		t.Errorf("claim %s reserved for %+v, want the PodGroup", claim.Name, claim.Status.ReservedFor)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		m.assertChannel(ctx, t, fx, p, domain, channel)
		gpus, err := m.podClaim(ctx, &p, "gpus")
		if err != nil || gpus == nil {
			t.Fatalf("worker %s: no claim for its GPUs (%v)", p.Name, err)
		}
		for _, d := range m.allocatedOn(ctx, t, p.Spec.NodeName, gpus) {
			if got := strAttr(d, slicebuilder.AttrNVLinkDomain); got != domain {
				t.Errorf("worker %s got GPU %s of domain %q, want %s", p.Name, d.name, got, domain)
			}
		}
		if specs := m.cdiSpecsOn(ctx, t, p.Spec.NodeName, string(claim.UID)); len(specs) != 1 {
			t.Errorf("tray %s: CDI specs of the channel claim %v, want one", p.Spec.NodeName, specs)
		}
	}
	if len(nodes) != nvlinkGang {
		t.Errorf("the gang's workers run on %v, want %d trays", slices.Sorted(maps.Keys(nodes)), nvlinkGang)
	}
	t.Logf("gang nvl-gang: channel %d of domain %s, trays %v", channel, domain, slices.Sorted(maps.Keys(nodes)))
	if t.Failed() {
		return
	}

	t.Run("PluginRestartKeepsChannel", func(t *testing.T) {
		victim := pods[0]
		tray := victim.Spec.NodeName
		before := m.runningState(ctx, t, victim.Name)
		old := m.readyPluginPods(ctx, t)[tray]
		start := time.Now()
		if err := m.cs.CoreV1().Pods(systemNS).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		m.readyPluginPods(ctx, t, string(old.UID))
		record(t, "NVLink: plugin pod deleted on a tray → new plugin Ready", time.Since(start))
		if after := m.runningState(ctx, t, victim.Name); after != before {
			t.Errorf("worker %s on %s was disturbed by the plugin restart: %+v, before %+v", victim.Name, tray, after, before)
		}
		if specs := m.cdiSpecsOn(ctx, t, tray, string(claim.UID)); len(specs) != 1 {
			t.Errorf("tray %s after the plugin restart: CDI specs of the channel claim %v, want one", tray, specs)
		}
	})

	t.Run("WorkerLost", func(t *testing.T) {
		victim := pods[0]
		index := victim.Annotations[completionIndex]
		start := time.Now()
		if err := m.cs.CoreV1().Pods(testNS).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var repl v1.Pod
		err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := m.jobPods(ctx, "nvl-gang")
			if err != nil {
				return false, err
			}
			for _, p := range list {
				if p.UID != victim.UID && p.Annotations[completionIndex] == index && p.Status.Phase == v1.PodRunning {
					repl = p
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			out, _ := m.kubectlRun(ctx, "-n", testNS, "get", "pods,podgroups,resourceclaims", "-o", "wide")
			t.Fatalf("no replacement of worker %s (index %s) Running: %v\n%s", victim.Name, index, err, out)
		}
		record(t, "NVLink: worker deleted → its replacement Running", time.Since(start))
		now := m.groupClaim(ctx, t, "nvl-gang")
		d, c, err := channelOf(now)
		if err != nil {
			t.Fatal(err)
		}
		if now.UID != claim.UID || d != domain || c != channel {
			t.Errorf("after the worker was replaced the group's claim is %s (%s), channel %d of %s; want %s, channel %d of %s", now.Name, now.UID, c, d, claim.Name, channel, domain)
		}
		m.assertChannel(ctx, t, fx, repl, domain, channel)
		t.Logf("worker %s on %s replaced by %s on %s", victim.Name, victim.Spec.NodeName, repl.Name, repl.Spec.NodeName)
	})

	t.Run("TwoJobsTwoChannels", func(t *testing.T) {
		// The gang holds every tray of its domain: two jobs of two GPUs
		// each find room in another domain's trays only.
		names := []string{"nvl-job-1", "nvl-job-2"}
		m.cleanup(t, names...)
		got := map[string][2]any{}
		for _, name := range names {
			m.startPod(ctx, t, m.nvlinkPod(name, claimRef{name: "gpus", template: "nvl-two"}, claimRef{name: "nvlink", template: "nvl-channel"}))
			p, err := m.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := m.podClaim(ctx, p, "nvlink")
			if err != nil || c == nil {
				t.Fatalf("pod %s: no channel claim (%v)", name, err)
			}
			fx.channelClaims = append(fx.channelClaims, string(c.UID))
			d, n, err := channelOf(c)
			if err != nil {
				t.Fatal(err)
			}
			m.assertChannel(ctx, t, fx, *p, d, n)
			got[name] = [2]any{d, n}
			if d == domain {
				t.Errorf("pod %s got a channel of %s, whose trays the gang holds", name, d)
			}
		}
		a, b := got[names[0]], got[names[1]]
		if a[0] != b[0] {
			t.Errorf("the two jobs run in domains %v and %v; the gang leaves room in one domain only", a[0], b[0])
		}
		if a == b {
			t.Errorf("two jobs in domain %v share channel %v", a[0], a[1])
		}
		t.Logf("two jobs in domain %v: channels %v and %v", a[0], a[1], b[1])
		m.deletePods(ctx, t, names...)
	})

	m.deleteNVLinkJob(ctx, t, fx, "nvl-gang")
}

// deleteNVLinkJob deletes a job and its PodGroup and waits until their pods
// and claims are gone, and no tray keeps a CDI spec of its channel claims.
func (m *menv) deleteNVLinkJob(ctx context.Context, t *testing.T, fx *nvlinkFixture, name string) {
	t.Helper()
	var claims []string
	if list, err := m.cs.ResourceV1().ResourceClaims(testNS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if strings.HasPrefix(c.Name, name+"-") {
				claims = append(claims, c.Name)
			}
		}
	}
	start := time.Now()
	if _, err := m.kubectlRun(ctx, "-n", testNS, "delete", "job", name, "--cascade=foreground", "--wait=true", "--timeout=2m"); err != nil {
		t.Errorf("delete job %s: %v", name, err)
	}
	if _, err := m.kubectlRun(ctx, "-n", testNS, "delete", "podgroup", name, "--wait=true", "--timeout=1m"); err != nil {
		t.Errorf("delete PodGroup %s: %v", name, err)
	}
	var left []string
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		left = left[:0]
		if pods, err := m.jobPods(ctx, name); err != nil || len(pods) > 0 {
			left = append(left, fmt.Sprintf("%d pods (%v)", len(pods), err))
		}
		for _, c := range claims {
			if _, err := m.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, c, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, "claim "+c)
			}
		}
		left = append(left, m.preparedChannels(ctx, t, fx)...)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("job %s deleted, but left: %s (%v)", name, strings.Join(left, "; "), err)
		return
	}
	record(t, "NVLink: job "+name+" deleted → pods, claims and channel CDI specs gone", time.Since(start))
}

// preparedChannels lists the CDI specs of the scenarios' channel claims
// still on the trays.
func (m *menv) preparedChannels(ctx context.Context, t *testing.T, fx *nvlinkFixture) []string {
	t.Helper()
	var out []string
	for _, node := range fx.trays {
		for _, uid := range fx.channelClaims {
			for _, s := range m.cdiSpecsOn(ctx, t, node, uid) {
				out = append(out, node+": "+s)
			}
		}
	}
	return out
}

// nvlinkGangTooLarge: a gang of one tray more than the largest domain
// has, although the cluster has that many trays free across its domains,
// waits whole: no worker bound, the gang never Running, and deleted it
// leaves no pod, claim or CDI spec. Its workers list the group's channel
// claim after their own (docs/nvlink.md: in the other order
// kube-scheduler 1.37 swaps the two claims' allocations and binds part
// of the gang).
func (m *menv) nvlinkGangTooLarge(ctx context.Context, t *testing.T, fx *nvlinkFixture) {
	n := fx.largest + 1
	label := slicebuilder.NVLinkDomainLabel(m.driver)
	m.nvlinkJob(ctx, t, "nvl-big", int32(n))
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := m.jobPods(ctx, "nvl-big")
		return err == nil && len(pods) == n, err
	}); err != nil {
		t.Fatalf("job nvl-big has not made its %d pods: %v", n, err)
	}
	// Watch the gang for a while after the scheduler has tried it (it
	// marks a worker Unschedulable): the checks hold at every sample.
	var why string
	bound := map[string]string{}
	tried, start, whole := time.Time{}, time.Now(), false
	_ = poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := m.jobPods(ctx, "nvl-big")
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && why == "" {
					why, tried = c.Message, time.Now()
				}
			}
			if p.Spec.NodeName != "" {
				bound[p.Name] = p.Spec.NodeName
			}
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		whole = whole || running == n
		// An observation window, not a timing: 15 s of samples after the
		// scheduler's first verdict, or 45 s without one.
		return (!tried.IsZero() && time.Since(tried) > 15*time.Second) || time.Since(start) > 45*time.Second, nil
	})
	if whole {
		t.Errorf("all %d workers of gang nvl-big ran, though no domain has %d trays", n, n)
	}
	t.Logf("gang of %d trays (largest domain: %d trays, %d trays in all): %s", n, fx.largest, len(fx.trays), why)
	claim, cerr := m.groupClaimWithin(ctx, "nvl-big", 10*time.Second)
	channelDomain := ""
	if cerr == nil {
		fx.channelClaims = append(fx.channelClaims, string(claim.UID))
		if claim.Status.Allocation != nil {
			channelDomain, _, _ = channelOf(claim)
		}
	}
	for pod, node := range bound {
		if d := fx.domainOf[node]; channelDomain == "" || d != channelDomain {
			t.Errorf("worker %s of gang nvl-big is bound to %s (domain %q), but the group's channel is of domain %q", pod, node, d, channelDomain)
		}
		nd, err := m.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil && nd.Labels[label] != channelDomain {
			t.Errorf("worker %s of gang nvl-big is bound to %s, labelled %q, outside its channel's domain %q", pod, node, nd.Labels[label], channelDomain)
		}
	}
	recordValue(t, "NVLink: workers bound of a gang larger than any domain (want 0)", float64(len(bound)), "pods")
	if len(bound) > 0 {
		t.Errorf("kube-scheduler bound %d of the %d workers of a gang that fits no domain (%v), the group's channel allocated in %q: the gang is not kept whole", len(bound), n, bound, channelDomain)
	}
	m.deleteNVLinkJob(ctx, t, fx, "nvl-big")
}

// nvlinkNothingLeft: after the scenarios no claim anywhere holds a
// channel, no tray keeps a channel's CDI spec, and the pools are as they
// were (they change only when a domain appears or goes).
func (m *menv) nvlinkNothingLeft(ctx context.Context, t *testing.T, fx *nvlinkFixture) {
	list, err := m.cs.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if strings.HasPrefix(r.Pool, slicebuilder.ChannelPoolPrefix) {
				t.Errorf("claim %s/%s still holds %s/%s", c.Namespace, c.Name, r.Pool, r.Device)
			}
		}
	}
	if left := m.preparedChannels(ctx, t, fx); len(left) > 0 {
		t.Errorf("channel CDI specs left on the trays: %v", left)
	}
	after := m.nvlinkPools(ctx, t, false)
	if fmt.Sprint(after.domains) != fmt.Sprint(fx.domains) {
		t.Errorf("domains after the scenarios %v, before %v", after.domains, fx.domains)
	}
	var inspectors []string
	for _, node := range fx.trays {
		inspectors = append(inspectors, inspectorOn(node))
	}
	m.deletePods(ctx, t, inspectors...)
}

// channelPoolsGone waits until no NVLink channel pool is left (after the
// chart is uninstalled) and says what is left otherwise.
func (m *menv) channelPoolsGone(ctx context.Context) error {
	var left []string
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := m.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, s := range list.Items {
			if strings.HasPrefix(s.Spec.Pool.Name, slicebuilder.ChannelPoolPrefix) {
				left = append(left, s.Name+" ("+s.Spec.Pool.Name+")")
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("channel pools left after helm uninstall: %v: %w", left, err)
	}
	return nil
}
