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
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/gpudratest"
)

// TestChaos (make chaos-local, hack/localcluster/chaos.sh) installs the
// chart on the local cluster and, for CHAOS_ITERATIONS iterations (default
// 200), creates and deletes pods with random claim shapes while it kills
// and restarts the plugin, injects XIDs, fills and frees the plugin's data
// disk and deletes CDI specs at random moments. After each iteration it
// waits for the node to settle and checks the invariants (chaos_invariants_test.go);
// at the end it deletes every pod and checks that nothing is left. It
// prints pods, faults by kind, violations (which fail the test) and the
// time the node took to recover.
//
// Environment: CHAOS_ITERATIONS, CHAOS_SEED (default: the time),
// CHAOS_TIMEOUT (default 120m, the whole run), CHAOS_DATA_DIR_SIZE_MIB (the
// size of the tmpfs chaos.sh mounts at the plugin data directory, which the
// disk-full fault fills), CHAOS_REPORT (a JSON file for the figures).
func TestChaos(t *testing.T) {
	e := newEnv(t)
	iterations := gpudratest.EnvInt(t, "CHAOS_ITERATIONS", 200)
	seed := uint64(gpudratest.EnvInt(t, "CHAOS_SEED", int(time.Now().UnixNano()%1_000_000)))
	timeout, err := time.ParseDuration(getenv("CHAOS_TIMEOUT", "120m"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	e.prepareNamespaces(ctx, t)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = run(cctx, e.helm, e.helmArgs("uninstall", releaseName, "-n", systemNS, "--wait")...)
		_ = e.cs.CoreV1().Namespaces().Delete(cctx, testNS, metav1.DeleteOptions{})
		_ = e.cs.CoreV1().Namespaces().Delete(cctx, systemNS, metav1.DeleteOptions{})
	})
	if !t.Run("Install", func(t *testing.T) { e.install(ctx, t) }) {
		t.FailNow()
	}

	c := newChaos(t, e, seed)
	t.Logf("chaos: %d iterations, seed %d (CHAOS_SEED=%d repeats the choices), timeout %v", iterations, seed, seed, timeout)
	began := time.Now()
	for i := 1; i <= iterations; i++ {
		if ctx.Err() != nil {
			c.violate("run", fmt.Sprintf("the run timed out after %d of %d iterations", i-1, iterations))
			break
		}
		c.iteration(ctx, i)
	}
	c.finish(ctx)
	c.report(t, iterations, time.Since(began))
	if len(c.violations) > 0 {
		t.Errorf("%d invariant violations", len(c.violations))
	}
}

// chaos is the run's state and figures.
type chaos struct {
	t   *testing.T
	e   *env
	rng *rand.Rand

	// live are the pods the run created and has not deleted, by name.
	live map[string]chaosPod
	next int

	// diskFull is set while the filler occupies the plugin's data disk.
	diskFull bool
	// killed is the plugin container the last sigkill or restart ended.
	killed pluginInstance

	podsCreated map[string]int // by shape
	podsRunning int            // pods that reached Running
	podsDeleted int
	// podsForceDeleted counts deletions with grace period 0.
	podsForceDeleted int
	faults           map[string]int // by kind
	violations       []string
	recoveries       map[string][]time.Duration // time to settle after an iteration, by what it did
	unscheduled      int                        // pods that stayed Pending for lack of devices, counted at settle
	prepareWaits     int                        // settles that waited for the disk to be freed
}

// chaosPod is a pod the run created.
type chaosPod struct {
	name    string
	shape   string
	claims  []string // claim names of the pod (ResourceClaims it created itself)
	running bool
	created time.Time
}

func newChaos(t *testing.T, e *env, seed uint64) *chaos {
	return &chaos{
		t: t, e: e, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		live: map[string]chaosPod{}, podsCreated: map[string]int{}, faults: map[string]int{},
		recoveries: map[string][]time.Duration{},
	}
}

func (c *chaos) violate(where, what string) {
	msg := where + ": " + what
	c.t.Log("VIOLATION " + msg)
	c.violations = append(c.violations, msg)
}

// maxLivePods keeps the node busy without making every pod wait for
// devices: eight GPUs, and MIG partitions several to a GPU.
const maxLivePods = 6

// iteration changes the workload, injects at most one fault at a random
// moment around it, and waits for the node to settle.
func (c *chaos) iteration(ctx context.Context, i int) {
	var did []string
	created := false
	if len(c.live) < maxLivePods && (len(c.live) < 2 || c.rng.IntN(3) > 0) {
		c.createPod(ctx, i)
		created = true
		did = append(did, "create")
	} else {
		c.deleteRandomPod(ctx)
		did = append(did, "delete")
	}
	if c.rng.IntN(2) == 0 {
		// Right away, or while a prepare or unprepare is under way.
		if created && c.rng.IntN(2) == 0 {
			time.Sleep(time.Duration(c.rng.IntN(1500)) * time.Millisecond)
		}
		did = append(did, c.injectFault(ctx))
	}
	// A full disk is freed at some later iteration, and always before
	// the run ends.
	if c.diskFull && c.rng.IntN(3) == 0 {
		c.freeDisk(ctx)
		did = append(did, "disk-free")
	}
	start := time.Now()
	kind := did[len(did)-1]
	if kind == "sigkill" || kind == "restart" {
		// The plugin's own part: back and registered with the kubelet.
		if err := c.waitPluginReady(ctx, 2*time.Minute); err != nil {
			c.violate(fmt.Sprintf("iteration %d (%s)", i, strings.Join(did, ", ")), err.Error())
		}
		c.recoveries["plugin-ready-after-"+kind] = append(c.recoveries["plugin-ready-after-"+kind], time.Since(start))
	}
	problems := c.settle(ctx, 2*time.Minute)
	c.recoveries[kind] = append(c.recoveries[kind], time.Since(start))
	for _, p := range problems {
		c.violate(fmt.Sprintf("iteration %d (%s)", i, strings.Join(did, ", ")), p)
	}
	if i%10 == 0 {
		c.t.Logf("chaos: iteration %d: %d pods live, %d created, faults %v, %d violations", i, len(c.live), c.next, c.faults, len(c.violations))
	}
}

// finish frees the disk, deletes every pod and checks that the node is
// left with nothing prepared.
func (c *chaos) finish(ctx context.Context) {
	if c.diskFull {
		c.freeDisk(ctx)
	}
	for name := range c.live {
		c.deletePod(ctx, name, false)
	}
	start := time.Now()
	for _, p := range c.settle(ctx, 3*time.Minute) {
		c.violate("end", p)
	}
	for _, p := range c.nodeEmpty(ctx) {
		c.violate("end", p)
	}
	c.recoveries["end"] = append(c.recoveries["end"], time.Since(start))
}

// report prints the figures and writes them to CHAOS_REPORT.
func (c *chaos) report(t *testing.T, iterations int, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "gpudra chaos run: %d iterations in %s\n", iterations, took.Round(time.Second))
	fmt.Fprintf(&b, "pods: %d created (%s), %d reached Running, %d deleted (%d of them forced)\n", c.next, sortedCounts(c.podsCreated), c.podsRunning, c.podsDeleted, c.podsForceDeleted)
	total := 0
	for _, n := range c.faults {
		total += n
	}
	fmt.Fprintf(&b, "faults: %d (%s)\n", total, sortedCounts(c.faults))
	fmt.Fprintf(&b, "invariant violations: %d\n", len(c.violations))
	for _, v := range c.violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "time to recover (settle after the iteration's last action), by that action:\n")
	kinds := make([]string, 0, len(c.recoveries))
	for k := range c.recoveries {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	type stat struct {
		N             int     `json:"n"`
		MedianSeconds float64 `json:"medianSeconds"`
		P95Seconds    float64 `json:"p95Seconds"`
		MaxSeconds    float64 `json:"maxSeconds"`
	}
	stats := map[string]stat{}
	for _, k := range kinds {
		d := slices.Clone(c.recoveries[k])
		slices.Sort(d)
		s := stat{N: len(d), MedianSeconds: d[len(d)/2].Seconds(), P95Seconds: d[(len(d)*95)/100].Seconds(), MaxSeconds: d[len(d)-1].Seconds()}
		stats[k] = s
		fmt.Fprintf(&b, "  %-26s n=%-4d median %5.1f s  p95 %5.1f s  max %5.1f s\n", k, s.N, s.MedianSeconds, s.P95Seconds, s.MaxSeconds)
	}
	fmt.Fprintf(&b, "pods left Pending for lack of devices at a settle: %d; settles that waited on a full disk: %d\n", c.unscheduled, c.prepareWaits)
	fmt.Print("\n" + b.String())
	t.Log("\n" + b.String())
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		data, _ := json.MarshalIndent(map[string]any{
			"iterations": iterations, "seconds": took.Seconds(), "podsCreated": c.podsCreated, "podsRunning": c.podsRunning,
			"podsDeleted": c.podsDeleted, "podsForceDeleted": c.podsForceDeleted, "faults": c.faults, "violations": c.violations, "recovery": stats,
		}, "", "  ")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Errorf("write %s: %v", path, err)
		}
	}
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// deletePod deletes one of the run's pods and the claims it created; the
// node's side (unprepare) is what settle waits for. One deletion in ten is
// forced (grace period 0): the pod object goes at once, before the kubelet
// has stopped its containers and unprepared its claims, so the scheduler
// may hand its devices to a new pod that must then wait.
func (c *chaos) deletePod(ctx context.Context, name string, force bool) {
	p := c.live[name]
	delete(c.live, name)
	opts := metav1.DeleteOptions{}
	if force {
		opts.GracePeriodSeconds = ptrTo[int64](0)
		c.podsForceDeleted++
	}
	err := c.e.cs.CoreV1().Pods(testNS).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		c.violate("delete "+name, err.Error())
	}
	for _, claim := range p.claims {
		// A shared claim goes with its last pod.
		if c.claimUsedByLive(claim) {
			continue
		}
		err := c.e.cs.ResourceV1().ResourceClaims(testNS).Delete(ctx, claim, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.violate("delete claim "+claim, err.Error())
		}
	}
	c.podsDeleted++
}

func (c *chaos) claimUsedByLive(claim string) bool {
	for _, p := range c.live {
		if slices.Contains(p.claims, claim) {
			return true
		}
	}
	return false
}

func (c *chaos) deleteRandomPod(ctx context.Context) {
	if len(c.live) == 0 {
		return
	}
	names := make([]string, 0, len(c.live))
	for n := range c.live {
		names = append(names, n)
	}
	sort.Strings(names)
	// Half the time a pod that never ran, as a user deletes a stuck pod.
	if c.rng.IntN(2) == 0 {
		var waiting []string
		for _, n := range names {
			if p := c.live[n]; !p.running && time.Since(p.created) > schedulerRetry {
				waiting = append(waiting, n)
			}
		}
		if len(waiting) > 0 {
			names = waiting
		}
	}
	c.deletePod(ctx, names[c.rng.IntN(len(names))], c.rng.IntN(10) == 0)
}

func ptrTo[T any](v T) *T { return &v }

// podPhase is a pod's phase and whether it is Running with its container
// ready.
func podRunning(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}
