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

package check

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// explainer diagnoses why a request cannot be allocated, at one moment:
// it reads the inventory, what the claims allocated so far hold (state)
// and what evaluator found, and owns nothing that outlives the diagnosis.
// runner.explainer makes one for the state of the moment; explain turns
// its reasons into findings.
type explainer struct {
	opts   Options
	feats  scheduler.Features
	inv    *inventory
	state  *scheduler.State
	report *Report
	eval   *evaluator
	// migCapable and migPublishing count the nodes with a GPU that can
	// take a MIG spare and those publishing MIG placements (noSpareNow).
	migCapable, migPublishing int
}

// explainer is a diagnosis of what the claims allocated so far hold.
func (r *runner) explainer() *explainer {
	return &explainer{
		opts: r.opts, feats: r.feats, inv: r.inv, state: r.state, report: r.report, eval: r.eval,
		migCapable: r.migCapable, migPublishing: r.migPublishing,
	}
}

// request says why a request cannot be allocated, or nil when
// nothing here rules it out. Its checks run in the order of the
// diagnosis priority, and the first that fails is the one reason given:
// the earlier a check, the more basic the problem it finds, and no fix of
// a later one helps while it fails. So: a firstAvailable request fails
// only when every subrequest does; then a class or selector that does not
// compile; no device of the class; no device the selectors match; too few
// on any one node; the capacity the request asks for; the claim's
// constraints; taints it does not tolerate; devices earlier claims hold
// (with --sequential, or replicas of one workload); and the counters left
// on the best node. Moving a check changes what gpudra check reports for
// an input that fails two of them (the corpus and golden tests pin the
// reports).
func (ex *explainer) request(ce *claimEval, re *reqEval, pinned string) []string {
	if re.sub != nil {
		var parts []string
		for i, s := range re.sub {
			rs := ex.request(ce, s, pinned)
			if len(rs) == 0 {
				return nil
			}
			parts = append(parts, fmt.Sprintf("firstAvailable[%d] %s: %s", i, s.name, strings.Join(rs, "; ")))
		}
		return []string{fmt.Sprintf("request %s: no subrequest can be satisfied (%s)", re.name, strings.Join(parts, " | "))}
	}
	prefix := "request " + re.name + ": "
	if re.missing || re.broken {
		return []string{prefix + "unusable DeviceClass or selector"}
	}
	need := re.count
	if re.mode == resourceapi.DeviceAllocationModeAll {
		need = 1
	}
	classCount := countTrue(re.classHits)
	total := countTrue(re.match)
	if classCount == 0 {
		msg := prefix + fmt.Sprintf("no device matches DeviceClass %s", re.class)
		if !ex.feats.Allocator.PartitionableDevices && ex.eval.classSelects(re.class, "'mig'") {
			msg += fmt.Sprintf(": on Kubernetes %s, which does not serve partitionable devices, gpudra publishes whole GPUs only, no MIG partitions (DRAPartitionableDevices is on by default from 1.36)", ex.report.KubernetesVersion)
		} else {
			msg += ex.noSpareNow(re.class)
		}
		return []string{msg}
	}
	if total == 0 {
		return []string{prefix + ex.eval.explainSelectors(re, classCount)}
	}
	nodes := ex.candidateNodes(pinned)
	// Not enough matching devices on any one node.
	bestNode, best := "", -1
	for _, n := range nodes {
		if c := ex.inv.countOn(ex.state, re.match, n, false); c > best {
			bestNode, best = n, c
		}
	}
	if int64(best) < need {
		return []string{prefix + fmt.Sprintf("needs %d device(s) on one node; %d match in all, at most %d on any one node (%s)", need, total, best, bestNode)}
	}
	// Capacity requests (consumable capacity).
	if msg := ex.capacity(re); msg != "" {
		return []string{prefix + msg}
	}
	// matchAttribute / distinctAttribute constraints.
	if msg := ex.constraints(ce, re, nodes, need); msg != "" {
		return []string{prefix + msg}
	}
	// Taints (admin access does not get past them either).
	if msg := ex.taints(re, nodes, need); msg != "" {
		return []string{prefix + msg}
	}
	// Held by earlier claims.
	if msg := ex.held(re, nodes, need); msg != "" {
		return []string{prefix + msg}
	}
	// Shared counters (partitionable devices).
	if msg := ex.counters(re, nodes, need); msg != "" {
		return []string{prefix + msg}
	}
	return nil
}

// taints: the matching devices carry taints the request does not
// tolerate, so that too few untainted ones are on any node (admin access
// does not get past them either).
func (ex *explainer) taints(re *reqEval, nodes []string, need int64) string {
	if !ex.feats.Allocator.DeviceTaints {
		return ""
	}
	bestUntainted, taints := 0, map[string]int{}
	for _, n := range nodes {
		c := 0
		for _, i := range ex.inv.onNode(n) {
			if !re.match[i] {
				continue
			}
			if t := untolerated(ex.inv.devices[i].dev.Taints, re.tolerates); t != "" {
				taints[t]++
				continue
			}
			c++
		}
		bestUntainted = max(bestUntainted, c)
	}
	if int64(bestUntainted) >= need || len(taints) == 0 {
		return ""
	}
	var ts []string
	for _, t := range sortedKeys(taints) {
		ts = append(ts, fmt.Sprintf("%s on %d", t, taints[t]))
	}
	key, rest, _ := strings.Cut(sortedKeys(taints)[0], "=")
	effect := rest[strings.LastIndex(rest, ":")+1:]
	return fmt.Sprintf("matching devices carry taints the request does not tolerate (%s); at most %d untainted on one node, %d needed: if the request is meant for them, tolerate the taint (tolerations: [{key: %s, operator: Exists, effect: %s}])",
		strings.Join(ts, ", "), bestUntainted, need, key, effect)
}

// held: claims earlier in the input (--sequential, or replicas of
// one workload) hold so many of the matching devices that too few are
// free on any node: whole, or, for a device that allows multiple
// allocations, so much of its capacity that this request's share (its
// capacity requests, or the device's defaults) no longer fits.
func (ex *explainer) held(re *reqEval, nodes []string, need int64) string {
	if re.admin {
		return ""
	}
	bestFree, freeNode := -1, ""
	for _, n := range nodes {
		c := 0
		for _, i := range ex.inv.onNode(n) {
			if re.match[i] && ex.freeFor(i, re) {
				c++
			}
		}
		if c > bestFree {
			bestFree, freeNode = c, n
		}
	}
	if int64(bestFree) >= need {
		return ""
	}
	holders := map[string]bool{}
	for _, i := range ex.inv.onNode(freeNode) {
		if re.match[i] && !ex.freeFor(i, re) {
			for _, h := range ex.state.Holders(ex.inv.devices[i].id) {
				holders[h] = true
			}
		}
	}
	held := sortedKeys(holders)
	sort.SliceStable(held, func(i, j int) bool { return scheduler.NaturalLess(held[i], held[j]) })
	if len(held) > 4 {
		held = append(held[:3:3], fmt.Sprintf("… (%d claims)", len(holders)))
	}
	return fmt.Sprintf("needs %d free device(s) on one node; at most %d of the matching ones are free (%s); earlier claims hold the rest: %s",
		need, bestFree, freeNode, strings.Join(held, ", "))
}

func (ex *explainer) candidateNodes(pinned string) []string {
	if pinned != "" {
		return []string{pinned}
	}
	out := make([]string, 0, len(ex.inv.nodes))
	for _, n := range ex.inv.nodes {
		out = append(out, n.Name)
	}
	return out
}

// untolerated returns the first NoSchedule/NoExecute taint not tolerated.
func untolerated(taints []resourceapi.DeviceTaint, tols []resourceapi.DeviceToleration) string {
	for _, t := range taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if (tol.Key == "" || tol.Key == t.Key) && (tol.Effect == "" || tol.Effect == t.Effect) &&
				(tol.Operator == resourceapi.DeviceTolerationOpExists || tol.Value == t.Value) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
		}
	}
	return ""
}

// noSpareNow says why a MIG class matches nothing when nodes could
// partition but none publishes placements at this moment ("" when that
// is not the case): in fleet mode most nodes publish whole GPUs only
// until gpudra-controller gives them a spare.
func (ex *explainer) noSpareNow(class string) string {
	if !ex.feats.Allocator.PartitionableDevices || ex.migCapable == 0 || ex.migPublishing > 0 || !ex.eval.classSelects(class, "'mig'") {
		return ""
	}
	return fmt.Sprintf(": none of the %d node(s) with a GPU that can take a MIG spare publishes MIG placements now; gpudra's plugin publishes them for its spare GPUs only (the plugin's --mig-spare-gpus, chart migSpareGPUs), and with fleet a node gets a spare when gpudra-controller gives it one for a pod that waits, so the pod is Pending until then (docs/mig.md, Spares across the fleet)", ex.migCapable)
}
