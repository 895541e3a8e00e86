//go:build e2e

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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// poolLabel tells the node pools of nodePools apart (deployments/helm/gpudra/README.md#node-pools).
const poolLabel = "gpudra.io/node-pool"

// nodePools: the release moves to two node pools, the node labelled into
// one of them (whole GPUs only) and none into the other. The pool's
// DaemonSet takes the node over from the single one, a pod that runs
// through the move is undisturbed and is released by the pool's plugin,
// the pool's values reach its plugin, the empty pool runs nothing; then
// the release moves back.
func (e *env) nodePools(ctx context.Context, t *testing.T) {
	e.createTemplate(ctx, t, "pools", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("through-pools", claimRef{name: "gpu", template: "pools"}))
	claim := e.podClaims(ctx, t, "through-pools")["gpu"]
	devs := e.allocated(ctx, t, claim)
	before := e.runningState(ctx, t, "through-pools")
	old := e.readyPluginPod(ctx, t)

	label := func(value string) {
		t.Helper()
		v := "null"
		if value != "" {
			v = fmt.Sprintf("%q", value)
		}
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, poolLabel, v))
		if _, err := e.cs.CoreV1().Nodes().Patch(ctx, e.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("whole")
	defer label("")

	start := time.Now()
	pools := []string{
		"--set", "nodePools[0].name=whole", "--set", "nodePools[0].migProfiles=none",
		"--set-string", "nodePools[0].kubeletPlugin.nodeSelector." + escapeKey(poolLabel) + "=whole",
		"--set", "nodePools[1].name=elsewhere",
		"--set-string", "nodePools[1].kubeletPlugin.nodeSelector." + escapeKey(poolLabel) + "=elsewhere",
	}
	upgrade := func(extra ...string) {
		t.Helper()
		args := e.helmArgs(append(append([]string{"upgrade", releaseName, e.chart, "-n", systemNS, "--wait", "--timeout", "3m"}, e.chartValues()...), extra...)...)
		if _, err := run(ctx, e.helm, args...); err != nil {
			t.Fatal(err)
		}
	}
	upgrade(pools...)
	moved := false
	defer func() {
		if !moved {
			upgrade()
		}
	}()
	pod := e.readyPluginPod(ctx, t, string(old.UID))
	record(t, "helm upgrade to node pools → the pool's plugin ready", time.Since(start))
	if pod.Labels[poolLabel] != "whole" {
		t.Errorf("plugin pod %s has %s=%q, want whole", pod.Name, poolLabel, pod.Labels[poolLabel])
	}
	ds := e.cs.AppsV1().DaemonSets(systemNS)
	if _, err := ds.Get(ctx, e.pluginDaemonSet(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the single pool's DaemonSet %s is still there: %v", e.pluginDaemonSet(), err)
	}
	if d, err := ds.Get(ctx, e.pluginDaemonSet()+"-elsewhere", metav1.GetOptions{}); err != nil {
		t.Errorf("the pool of no node has no DaemonSet: %v", err)
	} else if n := d.Status.DesiredNumberScheduled; n != 0 {
		t.Errorf("the pool of no node runs %d plugin pods, want none", n)
	}
	// The pool's values: whole GPUs only, no MIG placement published.
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, d := range e.devicesByName(ctx, t) {
			if ptr.Deref(d.attrs["type"].StringValue, "") == "mig" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("the pool's plugin publishes MIG placements though the pool says migProfiles=none: %v", err)
	}

	e.assertUndisturbed(ctx, t, "through-pools", before, devs, claim.UID)
	e.startPod(ctx, t, e.gpuPod("in-pool", claimRef{name: "gpu", template: "pools"}))
	assertSees(t, "in-pool", e.whatPodSees(ctx, t, "in-pool"), e.allocated(ctx, t, e.podClaims(ctx, t, "in-pool")["gpu"]))
	// The claim prepared before the move is released by the pool's plugin.
	e.deletePods(ctx, t, "through-pools", "in-pool")
	e.waitClaimGone(ctx, t, claim.Name)
	if specs := e.cdiSpecsOf(ctx, t, string(claim.UID)); len(specs) != 0 {
		t.Errorf("the claim prepared before the move left CDI specs: %v", specs)
	}

	start = time.Now()
	pod = e.readyPluginPod(ctx, t)
	upgrade()
	moved = true
	e.readyPluginPod(ctx, t, string(pod.UID))
	record(t, "helm upgrade back to one pool → its plugin ready", time.Since(start))
}

// escapeKey escapes the dots of a key for helm's --set.
func escapeKey(k string) string { return strings.ReplaceAll(k, ".", `\.`) }
