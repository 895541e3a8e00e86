//go:build e2e && chaos

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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

// The invariants, checked on the node itself (the plugin's checkpoint, the
// CDI spec directory, the fake GPUs' state) against the API server:
//
//  1. every running pod's devices are prepared, once, as allocated, and
//     its claims' CDI specs exist;
//  2. no device is prepared for two claims (the same device, a GPU and one
//     of its partitions, or overlapping partitions);
//  3. no checkpoint entry, CDI spec or MIG instance belongs to a claim that
//     no longer exists;
//  4. every pod runs, or says why not: Pending because no device is free,
//     or (only while the data disk is full) waiting for its prepare.
//
// settle waits until all four hold; what still fails at the timeout is a
// violation. While the disk is full, the node cannot record an unprepare,
// so a deleted claim may keep its entry (3) and a pod may wait (4).

// schedulerRetry is how long a pod may be unschedulable before that counts
// as settled: longer than the scheduler's longest back-off (10 s), so that
// it was retried after the devices of deleted pods were freed.
const schedulerRetry = 20 * time.Second

// settle polls until the node and the pods are in order or timeout passes,
// and returns what is still wrong then.
func (c *chaos) settle(ctx context.Context, timeout time.Duration) []string {
	start := time.Now()
	slow := false
	var problems []string
	// The checks use ctx, not the poll's: the last one before the timeout
	// runs to its end.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		problems = c.check(ctx)
		if len(problems) == 0 {
			return true, nil
		}
		// What a slow recovery waits for, once, for the log.
		if !slow && time.Since(start) > 15*time.Second {
			slow = true
			c.t.Logf("chaos: still settling after 15 s: %s", strings.Join(problems, "; "))
		}
		return false, nil
	})
	if len(problems) == 0 && slow {
		c.t.Logf("chaos: settled after %.1f s", time.Since(start).Seconds())
	}
	return problems
}

// check returns what is out of order now.
func (c *chaos) check(ctx context.Context) []string {
	var problems []string
	pods, err := c.e.cs.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"list pods: " + err.Error()}
	}
	claims, err := c.e.cs.ResourceV1().ResourceClaims(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"list claims: " + err.Error()}
	}
	claimByName := map[string]*resourceapi.ResourceClaim{}
	claimUIDs := map[string]bool{}
	for i := range claims.Items {
		claimByName[claims.Items[i].Name] = &claims.Items[i]
		claimUIDs[string(claims.Items[i].UID)] = true
	}
	cp, err := c.readCheckpoint()
	if err != nil {
		return []string{err.Error()}
	}
	specs, err := c.specFiles()
	if err != nil {
		return []string{"list CDI specs: " + err.Error()}
	}

	// 4, and the pods of 1.
	var running []*v1.Pod
	unscheduled := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		live, ok := c.live[p.Name]
		switch {
		case !ok:
			if !c.diskFull {
				problems = append(problems, fmt.Sprintf("pod %s was deleted but is still there (%s)", p.Name, p.Status.Phase))
			}
		case podRunning(p):
			running = append(running, p)
			if !live.running {
				live.running = true
				c.live[p.Name] = live
				c.podsRunning++
			}
		case unschedulable(p) != "" && time.Since(live.created) > schedulerRetry:
			unscheduled++
		case unschedulable(p) != "":
			// The scheduler may have tried while a deleted pod's claim was
			// still allocated; give it time to retry.
			problems = append(problems, fmt.Sprintf("pod %s: waiting for the scheduler to retry: %s", p.Name, unschedulable(p)))
		case c.diskFull:
			// Its prepare cannot be recorded: it waits for the disk.
		default:
			problems = append(problems, fmt.Sprintf("pod %s is %s and not running: %s", p.Name, p.Status.Phase, c.whyNotRunning(ctx, p)))
		}
	}

	// 1.
	for _, p := range running {
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimName == nil {
				continue
			}
			claim := claimByName[*pc.ResourceClaimName]
			if claim == nil || claim.Status.Allocation == nil {
				problems = append(problems, fmt.Sprintf("running pod %s: claim %s is gone or not allocated", p.Name, *pc.ResourceClaimName))
				continue
			}
			problems = append(problems, c.checkPrepared(p.Name, claim, cp, specs)...)
		}
	}

	// 2.
	problems = append(problems, exclusive(cp)...)

	// 3.
	for uid, rec := range cp.Claims {
		if !claimUIDs[uid] && !c.diskFull {
			problems = append(problems, fmt.Sprintf("checkpoint entry of claim %s/%s (%s, %s) whose ResourceClaim is gone", rec.Namespace, rec.Name, uid, rec.State))
		}
	}
	for _, f := range specs {
		uid := specUID(f, c.e.driver)
		if rec, ok := cp.Claims[uid]; !ok || rec.State == checkpoint.UnprepareStarted {
			problems = append(problems, fmt.Sprintf("CDI spec %s of a claim that is not prepared", f))
		}
	}
	insts, err := c.migInstances()
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, inst := range insts {
		if !accounted(cp, inst) {
			problems = append(problems, fmt.Sprintf("MIG instance %d (profile %d at %d) on GPU %s belongs to no prepared claim", inst.gi, inst.profile, inst.start, inst.gpu))
		}
	}
	if len(problems) == 0 && unscheduled > 0 {
		c.unscheduled += unscheduled
	}
	if len(problems) == 0 && c.diskFull {
		c.prepareWaits++
	}
	return problems
}

// checkPrepared: a running pod's claim is prepared as allocated, and its
// spec exists.
func (c *chaos) checkPrepared(pod string, claim *resourceapi.ResourceClaim, cp *checkpoint.Checkpoint, specs []string) []string {
	var problems []string
	uid := string(claim.UID)
	rec, ok := cp.Claims[uid]
	if !ok || rec.State != checkpoint.PrepareCompleted {
		return []string{fmt.Sprintf("running pod %s: claim %s is not recorded as prepared (%v, %q)", pod, claim.Name, ok, rec.State)}
	}
	var want, got []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == c.e.driver {
			want = append(want, r.Device)
		}
	}
	for _, d := range rec.Devices {
		got = append(got, d.Device)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(want, got) {
		problems = append(problems, fmt.Sprintf("running pod %s: claim %s prepared %v, allocated %v", pod, claim.Name, got, want))
	}
	if !slices.ContainsFunc(specs, func(f string) bool { return specUID(f, c.e.driver) == uid }) {
		problems = append(problems, fmt.Sprintf("running pod %s: claim %s has no CDI spec", pod, claim.Name))
	}
	return problems
}

// exclusive: no device is prepared for two claims.
func exclusive(cp *checkpoint.Checkpoint) []string {
	type use struct {
		claim string
		d     checkpoint.Device
	}
	byGPU := map[string][]use{}
	for uid, rec := range cp.Claims {
		for _, d := range rec.Devices {
			if !d.AdminAccess {
				byGPU[d.GPUUUID] = append(byGPU[d.GPUUUID], use{uid, d})
			}
		}
	}
	var problems []string
	for g, uses := range byGPU {
		for i, a := range uses {
			for _, b := range uses[:i] {
				if a.claim == b.claim {
					continue
				}
				overlap := a.d.Mig == nil || b.d.Mig == nil ||
					gpu.MigPlacement{Start: a.d.Mig.PlacementStart, Size: a.d.Mig.PlacementSize}.Overlaps(
						gpu.MigPlacement{Start: b.d.Mig.PlacementStart, Size: b.d.Mig.PlacementSize})
				if overlap {
					problems = append(problems, fmt.Sprintf("GPU %s: %s is prepared for claim %s and %s for claim %s", g, a.d.Device, a.claim, b.d.Device, b.claim))
				}
			}
		}
	}
	return problems
}

// unschedulable returns the scheduler's reason when the pod waits for
// devices, or "".
func unschedulable(p *v1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Message != "" {
			return cond.Message
		}
	}
	return ""
}

// whyNotRunning is what the pod's events and container say.
func (c *chaos) whyNotRunning(ctx context.Context, p *v1.Pod) string {
	var why []string
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			why = append(why, w.Reason+": "+w.Message)
		}
	}
	events, _ := c.e.eventsFor(ctx, "Pod", p.Name)
	if len(events) > 3 {
		events = events[len(events)-3:]
	}
	return strings.Join(append(why, events...), "; ")
}

// readCheckpoint reads the plugin's checkpoint on the node; a missing one
// is empty.
func (c *chaos) readCheckpoint() (*checkpoint.Checkpoint, error) {
	cp, err := checkpoint.NewStore(filepath.Join(c.dataDir(), "checkpoint.json")).Load()
	if err != nil {
		return nil, fmt.Errorf("read the plugin's checkpoint: %w", err)
	}
	return cp, nil
}

// specUID is the claim UID in a spec file name.
func specUID(file, driver string) string {
	name := strings.TrimPrefix(file, "k8s."+driver+"-claim_")
	return strings.TrimSuffix(strings.TrimSuffix(name, ".yaml"), ".json")
}

// migInstance is one GPU instance in the fake GPUs' state on the node.
type migInstance struct {
	gpu                      string
	gi, profile, start, size int
}

func (c *chaos) migInstances() ([]migInstance, error) {
	data, err := os.ReadFile(filepath.Join(c.e.fakeDir, "nvmlfake-state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		GPUs map[string]struct {
			GpuInstances []struct {
				ID        int `json:"id"`
				ProfileID int `json:"profileID"`
				Start     int `json:"start"`
				Size      int `json:"size"`
			} `json:"gpuInstances"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("fake GPU state: %w", err)
	}
	var out []migInstance
	for uuid, g := range st.GPUs {
		for _, gi := range g.GpuInstances {
			out = append(out, migInstance{gpu: uuid, gi: gi.ID, profile: gi.ProfileID, start: gi.Start, size: gi.Size})
		}
	}
	return out, nil
}

// accounted: a claim's record holds the instance, or is creating one at
// its placement (the plugin records that step before the call).
func accounted(cp *checkpoint.Checkpoint, inst migInstance) bool {
	for _, rec := range cp.Claims {
		for _, d := range rec.Devices {
			m := d.Mig
			if d.GPUUUID != inst.gpu || m == nil || int(m.ProfileID) != inst.profile || m.PlacementStart != inst.start {
				continue
			}
			if (m.GPUInstanceID != nil && *m.GPUInstanceID == inst.gi) || (m.GPUInstanceID == nil && m.Step == checkpoint.MigCreatingGPUInstance) {
				return true
			}
		}
	}
	return false
}

// nodeEmpty: with every pod gone, nothing is prepared on the node.
func (c *chaos) nodeEmpty(ctx context.Context) []string {
	var problems []string
	cp, err := c.readCheckpoint()
	if err != nil {
		return []string{err.Error()}
	}
	for uid, rec := range cp.Claims {
		problems = append(problems, fmt.Sprintf("checkpoint still holds claim %s/%s (%s, %s)", rec.Namespace, rec.Name, uid, rec.State))
	}
	specs, _ := c.specFiles()
	for _, f := range specs {
		problems = append(problems, "CDI spec left: "+f)
	}
	insts, _ := c.migInstances()
	for _, inst := range insts {
		problems = append(problems, fmt.Sprintf("MIG instance left on GPU %s at %d", inst.gpu, inst.start))
	}
	if len(cp.MigModeEnabled) > 0 {
		c.t.Logf("chaos: gpudra left MIG mode on for %v (no claim uses them; the next whole-GPU claim turns it off)", cp.MigModeEnabled)
	}
	return problems
}
