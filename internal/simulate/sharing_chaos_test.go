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
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/mpsstandin"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// TestSharingChaos runs random claims that share GPUs (MPS shares, time-
// sliced shares, plain shares, whole GPUs with MPS or a time slice) on a
// node of shareable GPUs, and injects failures at every sharing step
// (start and stop of MPS daemons, compute mode, time slice; two kubelet
// calls in three fail at their first, second, third or fourth step): as a
// crash (the plugin dies there and restarts) or as an error the kubelet
// retries later, after other claims came and went. It also kills, stops (SIGSTOP)
// and wipes the directories of daemons, and restarts the plugin. After
// every iteration it checks the sharing invariants:
//
//   - every GPU is in the compute mode it had before gpudra and at the
//     default time slice once no claim uses MPS or a time slice on it,
//     and in exclusive-process (or at the claims' level) while one does;
//   - no daemon runs that no claim names, and every prepared claim's
//     daemon runs and answers its control protocol;
//   - the checkpoint records exactly the daemons, compute modes and time
//     slices the claims need;
//   - nothing outside gpudra's own directories was touched.
//
// GPUDRA_SHARING_CHAOS_ITERATIONS (default 12: make test) and
// GPUDRA_SHARING_CHAOS_SEED (default 1) choose the run; make
// chaos-sharing runs 200 iterations.
func TestSharingChaos(t *testing.T) {
	iterations := gpudratest.EnvInt(t, "GPUDRA_SHARING_CHAOS_ITERATIONS", 12)
	seed := gpudratest.EnvInt(t, "GPUDRA_SHARING_CHAOS_SEED", 1)
	ch := newSharingChaos(t, uint64(seed))
	start := time.Now()
	for i := range iterations {
		ch.iteration = i
		ch.act()
		ch.settle()
		ch.checkInvariants()
		if t.Failed() {
			t.Fatalf("iteration %d (seed %d): invariants violated after %s", i, seed, ch.lastAction)
		}
	}
	ch.drain()
	ch.checkInvariants()
	ch.checkEmpty()
	if t.Failed() {
		t.Fatalf("seed %d: something of sharing is left after every claim went", seed)
	}
	took := time.Since(start)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	fmt.Printf("gpudra sharing chaos: %d iterations (seed %d) in %v, %.2fs each; invariants held after every one\n",
		iterations, seed, took.Round(time.Second), took.Seconds()/float64(max(iterations, 1)))
	fmt.Printf("  actions: %s\n", counts(ch.actions))
	fmt.Printf("  faults injected: %s\n", counts(ch.faults))
	fmt.Printf("  outcomes: %s\n", counts(ch.outcomes))
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Chaos GPUs: the claims are confined to the first four GPUs, so that they
// share; gpu-1 starts in PROHIBITED, as an admin may have left it.
const chaosGPUs = 4

type sharingChaos struct {
	t    *testing.T
	ctx  context.Context
	c    *Cluster
	rng  *rand.Rand
	seq  int
	pre  map[string]nvml.ComputeMode // by GPU UUID: the mode before gpudra
	mode map[string]string           // by claim name: what it asks for

	// prepared are the claims the kubelet has prepared and not yet begun
	// to unprepare; leaving are those whose unprepare failed and that
	// the kubelet retries.
	prepared map[string]*resourceapi.ResourceClaim
	leaving  map[string]*resourceapi.ResourceClaim
	stopped  []int // SIGSTOPped daemon processes, resumed at the end

	sentinel, sentinelState string

	mu sync.Mutex
	// failAt, when set, fails the failAt-th sharing step of the next
	// kubelet call (steps counts them), as a crash or as an error;
	// failStep, when set, fails its first step of that name instead.
	failAt, steps int
	failStep      string
	crash         bool
	fired         bool
	// calm turns faults off (the end of the run).
	calm       bool
	iteration  int
	lastAction string
	actions    map[string]int
	faults     map[string]int
	outcomes   map[string]int
}

func newSharingChaos(t *testing.T, seed uint64) *sharingChaos {
	ch := &sharingChaos{
		t: t, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		pre: map[string]nvml.ComputeMode{}, mode: map[string]string{},
		prepared: map[string]*resourceapi.ResourceClaim{}, leaving: map[string]*resourceapi.ResourceClaim{},
		actions: map[string]int{}, faults: map[string]int{}, outcomes: map[string]int{},
	}
	_, ctx := ktesting.NewTestContext(t)
	// The plugin's own logs would drown the run's: errors only.
	ch.ctx = klog.NewContext(ctx, klog.FromContext(ctx).V(1))
	dir := gpudratest.ShortTempDir(t)
	hooks := nodestate.Hooks{AfterSharingStep: ch.hook}
	c, err := Start(ch.ctx, Options{Dir: dir, Profile: "dgx-h100", ConsumableCapacity: true, ShareSharing: "None",
		MPSCheckInterval: 250 * time.Millisecond, Hooks: hooks}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch.c = c
	t.Cleanup(func() {
		for _, pid := range ch.stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		ch.c.Stop()
		stopAllDaemons(t, ch.c)
	})
	applyClasses(ch.ctx, t, c)
	for i, g := range c.Driver.Node().GPUs[:chaosGPUs] {
		ch.pre[g.UUID] = nvml.COMPUTEMODE_DEFAULT
		if i == 1 {
			ch.pre[g.UUID] = nvml.COMPUTEMODE_PROHIBITED
			setComputeMode(t, c, g.UUID, nvml.COMPUTEMODE_PROHIBITED)
		}
	}
	// Something of the node's that is not gpudra's, beside its data.
	ch.sentinel = filepath.Join(dir, "not-gpudras")
	for _, p := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(ch.sentinel, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ch.sentinel, p, "file"), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ch.sentinelState = treeState(t, ch.sentinel)
	return ch
}

// hook fails the armed sharing step once.
func (ch *sharingChaos) hook(_ string, step string) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.steps++
	if ch.fired || (ch.failAt == 0 || ch.steps != ch.failAt) && (ch.failStep == "" || step != ch.failStep) {
		return nil
	}
	ch.fired = true
	kind := "error"
	if ch.crash {
		kind = "crash"
	}
	ch.faults[kind+" at "+step]++
	return fmt.Errorf("chaos: injected %s at %s", kind, step)
}

// arm picks whether the next kubelet call meets a fault (two in three
// do), and where: at one of its sharing steps by position (the first to
// the fourth: a call that takes fewer meets none), or, one time in three,
// at a step by name (nodestate.SharingSteps), so that the steps few calls
// reach (the compute mode set by a new daemon's prepare, restored by the
// last claim's unprepare) meet faults too.
func (ch *sharingChaos) arm() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.failAt, ch.failStep, ch.steps, ch.fired = 0, "", 0, false
	if !ch.calm && ch.rng.IntN(3) > 0 {
		if ch.rng.IntN(3) == 0 {
			ch.failStep = nodestate.SharingSteps[ch.rng.IntN(len(nodestate.SharingSteps))]
		} else {
			ch.failAt = 1 + ch.rng.IntN(4)
		}
		ch.crash = ch.rng.IntN(2) == 0
	}
}

// disarm returns whether the armed fault fired, and as a crash.
func (ch *sharingChaos) disarm() (fired, crash bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	fired, crash = ch.fired, ch.crash
	ch.failAt, ch.failStep, ch.fired = 0, "", false
	return fired, fired && crash
}

func (ch *sharingChaos) count(m map[string]int, key string) {
	ch.mu.Lock()
	m[key]++
	ch.mu.Unlock()
}

// restart is the plugin dying and the DaemonSet starting it again.
func (ch *sharingChaos) restart() {
	ch.t.Helper()
	ch.c.Stop()
	c, err := Start(ch.ctx, ch.c.Opts, ch.c.Client)
	if err != nil {
		ch.t.Fatalf("iteration %d: plugin restart: %v", ch.iteration, err)
	}
	ch.c = c
}

// claimKinds are what the chaos claims ask for.
var claimKinds = []string{"mps-share", "ts-long-share", "ts-short-share", "plain-share", "mps-whole", "ts-long-whole"}

func (ch *sharingChaos) newClaim() *resourceapi.ResourceClaim {
	ch.seq++
	kind := claimKinds[ch.rng.IntN(len(claimKinds))]
	name := fmt.Sprintf("c%03d-%s", ch.seq, kind)
	mem := fmt.Sprintf("%dGi", 5+5*ch.rng.IntN(6))
	var claim *resourceapi.ResourceClaim
	switch kind {
	case "mps-share":
		claim = shareClaim(name, mem, "", mpsSharing)
	case "ts-long-share":
		claim = shareClaim(name, mem, "", tsLong)
	case "ts-short-share":
		claim = shareClaim(name, mem, "", tsShort)
	case "plain-share":
		claim = shareClaim(name, mem, "", "")
	case "mps-whole":
		claim = shareClaim(name, "", "", mpsSharing)
	case "ts-long-whole":
		claim = shareClaim(name, "", "", tsLong)
	}
	claim.Spec.Devices.Requests[0].Exactly.Selectors = selectors(fmt.Sprintf("device.attributes['gpu.gpudra.io'].minor < %d", chaosGPUs))
	ch.mode[name] = kind
	return claim
}

// act does one random thing to the node, as pods, the kubelet, an
// operator or bad luck would.
func (ch *sharingChaos) act() {
	t := ch.t
	choices := []string{"add", "add", "add", "remove", "remove", "retry-unprepare", "kill-daemon", "stop-daemon", "wipe-daemon-dir", "restart-plugin"}
	action := choices[ch.rng.IntN(len(choices))]
	if len(ch.prepared) < 3 && ch.rng.IntN(3) > 0 {
		action = "add" // keep the GPUs shared
	}
	ch.lastAction = action
	ch.count(ch.actions, action)
	switch action {
	case "add":
		ch.add()
	case "remove":
		if name, ok := ch.pick(ch.prepared); ok {
			ch.lastAction += " " + name
			claim := ch.prepared[name]
			delete(ch.prepared, name)
			ch.unprepare(name, claim)
		}
	case "retry-unprepare":
		for _, name := range sortedKeys(ch.leaving) {
			ch.unprepare(name, ch.leaving[name])
		}
	case "kill-daemon", "stop-daemon", "wipe-daemon-dir":
		ids := daemons(t, ch.c)
		if len(ids) == 0 {
			return
		}
		id := ids[ch.rng.IntN(len(ids))]
		ch.lastAction += " " + id
		pid := daemonPID(ch.c, id)
		switch action {
		case "kill-daemon":
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case "stop-daemon":
			if syscall.Kill(pid, syscall.SIGSTOP) == nil {
				ch.stopped = append(ch.stopped, pid)
			}
		case "wipe-daemon-dir":
			_ = os.RemoveAll(filepath.Join(ch.c.Opts.MPSDir(), id))
		}
	case "restart-plugin":
		ch.restart()
	}
}

// add creates a claim and has the kubelet prepare it, retrying as the
// kubelet does after a failure (or a plugin that died).
func (ch *sharingChaos) add() {
	t := ch.t
	claim, err := ch.c.CreateClaim(ch.ctx, ch.newClaim())
	if err != nil {
		t.Fatal(err)
	}
	ch.lastAction += " " + claim.Name
	allocated, err := ch.c.Allocate(ch.ctx, claim)
	if err != nil {
		if errors.Is(err, ErrUnschedulable) {
			ch.count(ch.outcomes, "unschedulable")
			ch.deleteClaim(claim)
			return
		}
		t.Fatalf("allocate %s: %v", claim.Name, err)
	}
	claim = allocated
	for attempt := 0; ; attempt++ {
		ch.arm()
		msg := ch.prepare(claim)
		fired, crashed := ch.disarm()
		if crashed {
			ch.restart()
		}
		switch {
		case msg == "":
			ch.prepared[claim.Name] = claim
			ch.count(ch.outcomes, "prepared")
			return
		case fired:
			continue // the kubelet retries
		case strings.Contains(msg, "is shared with ResourceClaim") || strings.Contains(msg, "claims sharing a GPU must ask for the same interval"):
			// A refusal the node owes the claim (MPS beside non-MPS,
			// two intervals): the pod never starts; the kubelet
			// unprepares it when it is deleted.
			ch.count(ch.outcomes, "refused")
			ch.unprepare(claim.Name, claim)
			return
		case attempt < 3:
			// A daemon that is being replaced; the kubelet retries.
			continue
		default:
			t.Fatalf("prepare %s: %s", claim.Name, msg)
		}
	}
}

func (ch *sharingChaos) prepare(claim *resourceapi.ResourceClaim) string {
	resp, err := ch.c.NodePrepareResources(ch.ctx, claim)
	if err != nil {
		return err.Error()
	}
	return resp.Claims[string(claim.UID)].Error
}

// unprepare has the kubelet unprepare a claim; a failure leaves it for a
// later retry, while other claims come and go.
func (ch *sharingChaos) unprepare(name string, claim *resourceapi.ResourceClaim) {
	ch.arm()
	err := unprepareErr(ch.ctx, ch.t, ch.c, claim)
	fired, crashed := ch.disarm()
	if crashed {
		ch.restart()
	}
	if err != nil {
		if !fired {
			ch.t.Fatalf("unprepare %s failed without an injected fault: %v", name, err)
		}
		ch.leaving[name] = claim
		ch.count(ch.outcomes, "unprepare retried later")
		return
	}
	delete(ch.leaving, name)
	ch.deleteClaim(claim)
}

func (ch *sharingChaos) deleteClaim(claim *resourceapi.ResourceClaim) {
	if err := ch.c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ch.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		ch.t.Fatal(err)
	}
}

func (ch *sharingChaos) pick(m map[string]*resourceapi.ResourceClaim) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	keys := sortedKeys(m)
	return keys[ch.rng.IntN(len(keys))], true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// settle waits, as long as the plugin needs within its promises, for every
// prepared claim's daemon to answer: one that was killed, stopped or lost
// its directory is replaced within seconds.
func (ch *sharingChaos) settle() {
	var bad []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		bad = ch.unansweredDaemons()
		return len(bad) == 0, nil
	})
	if err != nil {
		ch.t.Errorf("iteration %d: daemons %v of prepared claims do not answer 20s after %s", ch.iteration, bad, ch.lastAction)
	}
}

// wantedDaemons are the daemons that prepared claims (in the checkpoint:
// PrepareCompleted) name.
func (ch *sharingChaos) wantedDaemons() map[string]bool {
	want := map[string]bool{}
	for _, c := range ch.c.Driver.State().Claims() {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range c.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == checkpoint.SharingMPS {
				want[d.Sharing.MPSDaemon] = true
			}
		}
	}
	return want
}

func (ch *sharingChaos) unansweredDaemons() []string {
	var bad []string
	self, _ := os.Executable()
	for id := range ch.wantedDaemons() {
		d := mps.Daemon{ID: id, Dir: filepath.Join(ch.c.Opts.MPSDir(), id)}
		d.Command.Control = []string{self, mpsstandin.ControlSubcommand}
		if err := mps.Ready(ch.ctx, d, 0); err != nil {
			bad = append(bad, id)
		}
	}
	sort.Strings(bad)
	return bad
}

// checkInvariants checks what the run promises after every iteration.
func (ch *sharingChaos) checkInvariants() {
	t := ch.t
	t.Helper()
	state := ch.c.Driver.State()
	claims := state.Claims()
	where := fmt.Sprintf("iteration %d, after %s", ch.iteration, ch.lastAction)

	// What the recorded claims use, per GPU.
	mpsOn := map[string]bool{}        // any recorded claim
	mpsReady := map[string]bool{}     // a prepared one
	tsOn := map[string]map[int]bool{} // levels of recorded claims
	tsReady := map[string]int{}       // level of prepared ones
	named := map[string]bool{}        // daemons any recorded claim names
	for _, c := range claims {
		for _, d := range c.Devices {
			if d.Sharing == nil || d.Mig != nil {
				continue
			}
			switch d.Sharing.Strategy {
			case checkpoint.SharingMPS:
				mpsOn[d.GPUUUID] = true
				named[d.Sharing.MPSDaemon] = true
				if c.State == checkpoint.PrepareCompleted {
					mpsReady[d.GPUUUID] = true
				}
			case checkpoint.SharingTimeSlicing:
				if tsOn[d.GPUUUID] == nil {
					tsOn[d.GPUUUID] = map[int]bool{}
				}
				tsOn[d.GPUUUID][d.Sharing.TimeSlice] = true
				if c.State == checkpoint.PrepareCompleted {
					tsReady[d.GPUUUID] = d.Sharing.TimeSlice
				}
			}
		}
	}
	for uuid, pre := range ch.pre {
		p := policyOf(t, ch.c, uuid)
		switch {
		case mpsReady[uuid] && p.computeMode != nvml.COMPUTEMODE_EXCLUSIVE_PROCESS:
			t.Errorf("%s: GPU %s in compute mode %d while a prepared claim uses MPS on it", where, uuid, p.computeMode)
		case !mpsOn[uuid] && p.computeMode != pre:
			t.Errorf("%s: GPU %s in compute mode %d with no MPS claim on it, want %d, its mode before gpudra", where, uuid, p.computeMode, pre)
		}
		if level, ok := tsReady[uuid]; ok && p.timeSlice != level {
			t.Errorf("%s: GPU %s at time slice %d while a prepared claim asks for %d", where, uuid, p.timeSlice, level)
		}
		if levels := tsOn[uuid]; (len(levels) == 0 || (len(levels) == 1 && levels[0])) && p.timeSlice != 0 {
			t.Errorf("%s: GPU %s at time slice %d with no claim asking for one", where, uuid, p.timeSlice)
		}
		if _, ok := state.ComputeModes()[uuid]; ok && !mpsOn[uuid] {
			t.Errorf("%s: the checkpoint keeps a compute mode to restore for GPU %s, which no MPS claim uses", where, uuid)
		}
	}
	for _, id := range daemons(t, ch.c) {
		if !named[id] {
			t.Errorf("%s: MPS daemon %s runs, and no claim names it", where, id)
		}
	}
	for id := range state.MPSDaemons() {
		if !named[id] {
			t.Errorf("%s: the checkpoint records MPS daemon %s, which no claim names", where, id)
		}
	}
	if bad := ch.unansweredDaemons(); len(bad) > 0 {
		t.Errorf("%s: prepared claims' daemons %v do not answer", where, bad)
	}
	for name := range ch.prepared {
		if st := state.PreparedClaims()[string(ch.prepared[name].UID)]; st != checkpoint.PrepareCompleted {
			t.Errorf("%s: claim %s, prepared for the kubelet, is recorded as %q", where, name, st)
		}
	}
	// gpudra's MPS directory holds the daemons' directories, and their PID
	// and lock files; nothing else of the node changed.
	entries, _ := os.ReadDir(ch.c.Opts.MPSDir())
	for _, e := range entries {
		if e.IsDir() && !named[e.Name()] {
			t.Errorf("%s: directory %s of no claim's daemon left in %s", where, e.Name(), ch.c.Opts.MPSDir())
		}
	}
	if got := treeState(t, ch.sentinel); got != ch.sentinelState {
		t.Errorf("%s: a directory outside gpudra's was changed:\n%s\nwas\n%s", where, got, ch.sentinelState)
	}
}

// drain has every claim go, with no faults, as when every pod is deleted.
func (ch *sharingChaos) drain() {
	ch.mu.Lock()
	ch.calm = true
	ch.mu.Unlock()
	for _, name := range sortedKeys(ch.leaving) {
		ch.unprepare(name, ch.leaving[name])
	}
	for _, name := range sortedKeys(ch.prepared) {
		claim := ch.prepared[name]
		delete(ch.prepared, name)
		ch.unprepare(name, claim)
	}
	ch.lastAction = "every claim went"
}

// checkEmpty checks the node once every claim is gone: nothing of
// gpudra's sharing is left.
func (ch *sharingChaos) checkEmpty() {
	t := ch.t
	state := ch.c.Driver.State()
	if n := len(state.Claims()); n != 0 {
		t.Errorf("%d claims recorded after every claim went", n)
	}
	if d := state.MPSDaemons(); len(d) != 0 {
		t.Errorf("daemons recorded after every claim went: %v", d)
	}
	if m := state.ComputeModes(); len(m) != 0 {
		t.Errorf("compute modes recorded after every claim went: %v", m)
	}
	if ts := state.TimeSlices(); len(ts) != 0 {
		t.Errorf("time slices recorded after every claim went: %v", ts)
	}
	if ids := daemons(t, ch.c); len(ids) != 0 {
		t.Errorf("daemons run after every claim went: %v", ids)
	}
	for _, pid := range ch.stopped {
		if !processGone(pid) {
			t.Errorf("the stopped daemon %d is still there", pid)
		}
	}
	var left []string
	for _, uuid := range sortedKeys(ch.pre) {
		if p := policyOf(t, ch.c, uuid); p.computeMode != ch.pre[uuid] || p.timeSlice != 0 {
			left = append(left, fmt.Sprintf("%s: %s", uuid, describe(p)))
		}
	}
	if len(left) > 0 {
		t.Errorf("GPUs not back as they were before gpudra: %v", left)
	}
}

// treeState lists a directory tree's paths, sizes and modification times.
func treeState(t *testing.T, root string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %d", path, info.Size(), info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		return "error: " + err.Error()
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
