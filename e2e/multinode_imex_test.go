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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gpudra/gpudra/internal/plugin"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Every tray of the local cluster runs a stand-in IMEX daemon as a host
// service (hack/localcluster/node.sh), which its plugin asks as it asks
// NVIDIA's nvidia-imex (kubeletPlugin.imex.daemon: host). The suite
// finds each daemon's host PID in the cluster's PID directory.

// imexDaemonPID is the host PID of the stand-in IMEX daemon on a tray.
func imexDaemonPID(t *testing.T, node string) int {
	t.Helper()
	dir := os.Getenv("GPUDRA_E2E_LC_PIDS")
	n, ok := strings.CutPrefix(node, "e2e-node-")
	if dir == "" || !ok {
		t.Fatalf("tray %s: no PID directory of the local cluster (GPUDRA_E2E_LC_PIDS, set by hack/localcluster/e2e-local.sh)", node)
	}
	b, err := os.ReadFile(filepath.Join(dir, "imex-"+n+".pid"))
	if err != nil {
		t.Fatalf("tray %s: its IMEX daemon's PID: %v", node, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("tray %s: its IMEX daemon's PID file: %v", node, err)
	}
	return pid
}

// trayIMEX is what a tray shows of its daemon: the controller's label,
// and the imexReady its plugin publishes on its GPUs.
func (m *menv) trayIMEX(ctx context.Context, node string) (label string, published []string, domainLabel string, err error) {
	nd, err := m.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", nil, "", err
	}
	sl, err := m.nodeSlices(ctx, node)
	if err != nil {
		return "", nil, "", err
	}
	seen := map[string]bool{}
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[slicebuilder.AttrIMEXReady]; ok && a.BoolValue != nil {
				seen[strconv.FormatBool(*a.BoolValue)] = true
			}
		}
	}
	for v := range seen {
		published = append(published, v)
	}
	return nd.Labels[slicebuilder.IMEXReadyLabel(m.driver)], published, nd.Labels[slicebuilder.NVLinkDomainLabel(m.driver)], nil
}

// nvlinkHungDaemon: a tray whose IMEX daemon stops answering (SIGSTOP, as
// a hung daemon) loses its imex-ready label, keeps its domain label, and
// gets a Warning Event; a new pod that holds a channel and may run only
// there stays Pending, while a pod that asks for its GPUs alone runs.
// Once the daemon answers again (SIGCONT) the label comes back and the
// waiting pod runs there with its channel.
func (m *menv) nvlinkHungDaemon(ctx context.Context, t *testing.T, fx *nvlinkFixture) {
	tray := fx.domains[fx.big][0]
	pid := imexDaemonPID(t, tray)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT to the IMEX daemon of %s (pid %d): %v", tray, pid, err)
			}
		}
	}
	t.Cleanup(resume)
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to the IMEX daemon of %s (pid %d): %v", tray, pid, err)
	}
	var label, domainLabel string
	var published []string
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		label, published, domainLabel, err = m.trayIMEX(ctx, tray)
		return err == nil && label == "" && fmt.Sprint(published) == "[false]", err
	}); err != nil {
		t.Fatalf("tray %s, daemon hung: label %s=%q, its GPUs publish imexReady %v; want no label and false: %v",
			tray, slicebuilder.IMEXReadyLabel(m.driver), label, published, err)
	}
	record(t, "NVLink: IMEX daemon hung → its tray's imex-ready label gone", time.Since(start))
	if domainLabel != fx.big {
		t.Errorf("tray %s, daemon hung: domain label %q, want it kept (%s)", tray, domainLabel, fx.big)
	}
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := m.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Node", "involvedObject.name": tray, "reason": plugin.ReasonIMEXDaemonNotReady,
		}.String()})
		return err == nil && len(evs.Items) > 0, err
	}); err != nil {
		t.Errorf("tray %s, daemon hung: no %s Event on its Node: %v", tray, plugin.ReasonIMEXDaemonNotReady, err)
	}

	// A pod with a channel, only for this tray, waits; one with GPUs alone
	// runs there.
	channelPod := m.nvlinkPod("nvl-hung-channel", claimRef{name: "gpus", template: "nvl-two"}, claimRef{name: "nvlink", template: "nvl-channel"})
	channelPod.Spec.NodeSelector = onNode(tray)
	gpusPod := m.nvlinkPod("nvl-hung-gpus", claimRef{name: "gpus", template: "nvl-two"})
	gpusPod.Spec.NodeSelector = onNode(tray)
	m.cleanup(t, channelPod.Name, gpusPod.Name)
	if _, err := m.cs.CoreV1().Pods(testNS).Create(ctx, channelPod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", channelPod.Name, err)
	}
	m.startPod(ctx, t, gpusPod)
	var why string
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := m.cs.CoreV1().Pods(testNS).Get(ctx, channelPod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod %s bound to %s while the daemon there is hung", p.Name, p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				why = c.Message
			}
		}
		return why != "", nil
	}); err != nil {
		t.Fatalf("pod %s with a channel, for tray %s whose daemon is hung: %v", channelPod.Name, tray, err)
	}
	t.Logf("daemon hung on %s: pod %s with a channel is unschedulable: %s", tray, channelPod.Name, why)

	start = time.Now()
	resume()
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		label, published, _, err = m.trayIMEX(ctx, tray)
		return err == nil && label == "true" && fmt.Sprint(published) == "[true]", err
	}); err != nil {
		t.Fatalf("tray %s, daemon answering again: label %q, imexReady %v; want true: %v", tray, label, published, err)
	}
	p := m.waitRunning(ctx, t, channelPod.Name)
	record(t, "NVLink: hung IMEX daemon answers again → waiting channel pod Running", time.Since(start))
	claim, err := m.podClaim(ctx, p, "nvlink")
	if err != nil || claim == nil {
		t.Fatalf("pod %s: no claim for its channel (%v)", p.Name, err)
	}
	domain, channel, err := channelOf(claim)
	if err != nil {
		t.Fatal(err)
	}
	m.assertChannel(ctx, t, fx, *p, domain, channel)
	m.deletePods(ctx, t, channelPod.Name, gpusPod.Name)
}
