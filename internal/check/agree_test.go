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
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/simulate"
)

// TestCheckAgreesWithSimulate is the differential test between gpudra
// check and gpudra simulate, which runs the real kubelet plugin: for every
// shipped example on every fake profile, and for every runnable corpus
// file (on its node pool and Kubernetes version), check (with
// --sequential) and simulate give each claim the same devices, leave the
// same pods unschedulable, and fail the same pods' prepare, for the same
// kind of refusal (internal/claimplan). Both go through the offline scheduler
// core and the plugin's prepare-time decision, so a difference means one
// of them stopped doing what the scheduler or the plugin does.
func TestCheckAgreesWithSimulate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the kubelet plugin once per profile and corpus file")
	}
	examples, err := fs.Glob(deviceclasses.FS, "examples/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, profile := range nvmlfake.Profiles() {
		t.Run("examples/"+profile, func(t *testing.T) {
			cc := corpusCase{profile: profile, shareSharing: "None"}
			ctx, c := startSimulate(t, cc)
			for _, f := range examples {
				data, err := fs.ReadFile(deviceclasses.FS, f)
				if err != nil {
					t.Fatal(err)
				}
				in := &scheduler.Manifests{}
				if err := in.Add(f, data); err != nil {
					t.Fatal(err)
				}
				agree(ctx, t, c, cc, in)
			}
		})
	}
	for _, cc := range loadCorpus(t) {
		if strings.HasPrefix(cc.simulate, "skip") {
			continue
		}
		t.Run("corpus/"+strings.TrimSuffix(filepath.Base(cc.file), ".yaml"), func(t *testing.T) {
			in, err := scheduler.LoadPaths([]string{cc.file}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, c := startSimulate(t, cc)
			got := agree(ctx, t, c, cc, in)
			if got != cc.simulate {
				t.Errorf("simulate: %s, the header says %s", got, cc.simulate)
			}
		})
	}
}

// startSimulate starts the plugin on the case's node pool and Kubernetes
// version.
func startSimulate(t *testing.T, cc corpusCase) (context.Context, *simulate.Cluster) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx = klogQuiet(ctx)
	c, err := simulate.Start(ctx, simulate.Options{Dir: gpudratest.ShortTempDir(t), Profile: cc.profile, KubernetesVersion: cc.kubernetes,
		ConsumableCapacity: cc.pool.ConsumableCapacity, ShareSharing: cc.shareSharing, MPSDisabled: cc.noMPS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	classes, err := simulate.LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range classes {
		if err := c.ApplyDeviceClass(ctx, dc); err != nil {
			t.Fatal(err)
		}
	}
	// The inventory check runs against is what the plugin publishes, on
	// that version once it fell back to what the cluster serves.
	// The NVLink domains' channel pools are gpudra-controller's, which
	// simulate does not run: only the node's own slices are compared.
	pool, _ := cc.poolFor(t)
	var nodeSlices []*resourceapi.ResourceSlice
	for _, s := range fakePoolInventory(t, cc.profile, 1, pool) {
		if s.Spec.NodeName != nil {
			nodeSlices = append(nodeSlices, s)
		}
	}
	want := specsOf(t, nodeSlices)
	var got []string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		published, err := c.Slices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = specsOf(t, published)
		return slices.Equal(got, want), nil
	})
	if !slices.Equal(got, want) {
		diff := fmt.Sprintf("%d slices published, %d built", len(got), len(want))
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				diff = fmt.Sprintf("published %.400s…\nbuilt     %.400s…", got[i], want[i])
				break
			}
		}
		t.Fatalf("internal/fakenodes builds other slices for %s (%+v) than the plugin publishes: %s", cc.profile, pool, diff)
	}
	return ctx, c
}

// agree runs the manifests through check (sequential) and through the
// simulated node in the same order, compares, and returns what simulate
// did: agree, prepare-fails or unschedulable.
func agree(ctx context.Context, t *testing.T, c *simulate.Cluster, cc corpusCase, in *scheduler.Manifests) string {
	t.Helper()
	cc.sequential = true
	rep, err := Run(ctx, cc.options(t, Options{Inputs: in}))
	if err != nil {
		t.Fatal(err)
	}
	sim := runSequentially(ctx, t, c, in)
	outcome := "agree"
	for name, want := range checkAllocations(rep) {
		got, ok := sim.allocations[name]
		if !ok {
			t.Errorf("claim %s: check allocates %v, simulate does not allocate it", name, want)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("claim %s: check allocates %v, simulate %v", name, want, got)
		}
	}
	for name, got := range sim.allocations {
		if _, ok := checkAllocations(rep)[name]; !ok {
			t.Errorf("claim %s: simulate allocates %v, check does not", name, got)
		}
	}
	for _, p := range rep.Pods {
		res, ran := sim.pods[p.Name]
		switch {
		case !ran:
			t.Errorf("pod %s: simulate did not run it", p.Name)
		case p.Pending != pendingOn(res):
			t.Errorf("pod %s: check pending %v, simulate: %v", p.Name, p.Pending, res)
		}
		if pendingOn(res) {
			outcome = "unschedulable"
		}
	}
	for _, ci := range rep.Claims {
		err, alone := sim.alone[ci.Name]
		if !alone {
			continue
		}
		if (len(ci.Unsatisfiable) > 0) != pendingOn(err) {
			t.Errorf("claim %s: check says %v, simulate: %v", ci.Name, ci.Unsatisfiable, err)
		}
		if pendingOn(err) {
			outcome = "unschedulable"
		}
	}
	// What the plugin refuses, check predicts, for the same reason.
	predicted := map[string]string{}
	for _, p := range rep.Pods {
		predicted[p.Name] = strings.Join(p.PrepareFails, "; ")
	}
	for pod, err := range sim.pods {
		failed := err != nil && strings.Contains(err.Error(), "prepare failed")
		if failed && outcome == "agree" {
			outcome = "prepare-fails"
		}
		switch {
		case failed != (predicted[pod] != ""):
			t.Errorf("pod %s: simulate's prepare error %v; check predicts %q", pod, err, predicted[pod])
		case failed && refusalKind(err.Error()) != refusalKind(predicted[pod]):
			t.Errorf("pod %s: simulate's prepare fails with %v, check predicts %s", pod, err, predicted[pod])
		}
	}
	return outcome
}

// pendingOn says whether what simulate returned leaves the pod Pending
// (or the claim without devices): no devices fit, a selector stops the
// scheduler with an error, or a claim or template the pod names does not
// exist.
func pendingOn(err error) bool {
	var fe *scheduler.FilterError
	return errors.Is(err, simulate.ErrUnschedulable) || errors.As(err, &fe) || apierrors.IsNotFound(err)
}

// simulated is what the simulated node did with the manifests.
type simulated struct {
	allocations map[string][]string // claim → request=device, sorted
	pods        map[string]error    // pod → what RunPod returned
	alone       map[string]error    // claim no pod uses → what Allocate returned
	sources     map[string][]string // pod → the objects its claims come from, as check names them
}

// runSequentially does with the manifests what check --sequential does,
// in the same order: pods (a workload's replicas as check names them),
// and the claims and templates no pod uses, allocated on their own; every
// claim keeps its devices until the end, then all are released.
func runSequentially(ctx context.Context, t *testing.T, c *simulate.Cluster, in *scheduler.Manifests) simulated {
	t.Helper()
	sim := simulated{allocations: map[string][]string{}, pods: map[string]error{}, alone: map[string]error{}, sources: map[string][]string{}}
	for _, o := range in.Classes {
		if err := c.ApplyDeviceClass(ctx, o.Obj.(*resourceapi.DeviceClass).DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range in.Templates {
		tmpl := o.Obj.(*resourceapi.ResourceClaimTemplate)
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(tmpl.Namespace).Create(ctx, tmpl.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	usedClaims, usedTemplates := map[string]bool{}, map[string]bool{}
	for _, o := range in.Pods {
		pod := o.Obj.(*v1.Pod)
		for _, pc := range pod.Spec.ResourceClaims {
			switch {
			case pc.ResourceClaimName != nil:
				usedClaims[pod.Namespace+"/"+*pc.ResourceClaimName] = true
			case pc.ResourceClaimTemplateName != nil:
				usedTemplates[pod.Namespace+"/"+*pc.ResourceClaimTemplateName] = true
			}
		}
	}
	for _, o := range in.Claims {
		if _, err := c.CreateClaim(ctx, o.Obj.(*resourceapi.ResourceClaim)); err != nil {
			t.Fatal(err)
		}
	}
	type step struct {
		src scheduler.Source
		run func()
	}
	var steps []step
	for _, o := range in.Pods {
		n := 1
		if o.Owner != "" {
			n = min(o.Replicas, maxReplicas)
		}
		for i := range n {
			pod := o.Obj.(*v1.Pod).DeepCopy()
			if i > 0 {
				pod.Name = strings.TrimSuffix(pod.Name, "-0") + fmt.Sprintf("-%d", i)
			}
			steps = append(steps, step{o.Source, func() {
				name := pod.Namespace + "/" + pod.Name
				res, err := c.RunPod(ctx, pod)
				sim.pods[name] = err
				for _, pc := range res.Claims {
					sim.sources[name] = append(sim.sources[name], claimSource(pod, pc.Name))
				}
			}})
		}
	}
	for _, o := range in.Claims {
		if !usedClaims[o.Name] {
			claim := o.Obj.(*resourceapi.ResourceClaim)
			steps = append(steps, step{o.Source, func() { sim.alone[o.Name] = allocateAlone(ctx, c, claim.Namespace, claim.Name) }})
		}
	}
	for _, o := range in.Templates {
		if !usedTemplates[o.Name] {
			tmpl := o.Obj.(*resourceapi.ResourceClaimTemplate)
			steps = append(steps, step{o.Source, func() {
				claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: tmpl.Name}, Spec: *tmpl.Spec.Spec.DeepCopy()}
				if _, err := c.CreateClaim(ctx, claim); err != nil {
					t.Fatal(err)
				}
				sim.alone[o.Name] = allocateAlone(ctx, c, claim.Namespace, claim.Name)
			}})
		}
	}
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i].src, steps[j].src
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Document < b.Document
	})
	for _, s := range steps {
		s.run()
	}
	// What every claim got, then release everything for the next file.
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Status.Allocation != nil {
			var devs []string
			for _, d := range claim.Status.Allocation.Devices.Results {
				devs = append(devs, d.Request+"="+d.Pool+"/"+d.Device)
			}
			sort.Strings(devs)
			sim.allocations[claim.Namespace+"/"+claim.Name] = devs
		}
		if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range in.Templates {
		tmpl := o.Obj.(*resourceapi.ResourceClaimTemplate)
		_ = c.Client.ResourceV1().ResourceClaimTemplates(tmpl.Namespace).Delete(ctx, tmpl.Name, metav1.DeleteOptions{})
	}
	return sim
}

// allocateAlone allocates a claim no pod uses, as check does.
func allocateAlone(ctx context.Context, c *simulate.Cluster, namespace, name string) error {
	claim, err := c.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		_, err = c.Allocate(ctx, claim)
	}
	return err
}

// claimSource names the object a pod's claim comes from as check's
// findings do: the ResourceClaim, the ResourceClaimTemplate, or the pod
// itself for the claim of its extended resources.
func claimSource(pod *v1.Pod, entry string) string {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name != entry {
			continue
		}
		if pc.ResourceClaimName != nil {
			return "ResourceClaim " + pod.Namespace + "/" + *pc.ResourceClaimName
		}
		return "ResourceClaimTemplate " + pod.Namespace + "/" + *pc.ResourceClaimTemplateName
	}
	return "Pod " + pod.Namespace + "/" + pod.Name
}

// checkAllocations is what check allocated: claim → request=pool/device,
// sorted.
func checkAllocations(rep *Report) map[string][]string {
	out := map[string][]string{}
	for _, c := range rep.Claims {
		if c.Allocation == nil {
			continue
		}
		var devs []string
		for _, d := range c.Allocation.Devices {
			devs = append(devs, d.Request+"="+d.Pool+"/"+d.Device)
		}
		sort.Strings(devs)
		out[c.Name] = devs
	}
	return out
}

// specsOf renders slices' specs in a canonical order, for comparing
// inventories whose objects are named differently, and whose pools were
// republished a different number of times (the generation).
func specsOf(t *testing.T, slices []*resourceapi.ResourceSlice) []string {
	t.Helper()
	var out []string
	for _, s := range slices {
		s = s.DeepCopy()
		s.Spec.Pool.Generation = 0
		out = append(out, sliceJSONSpec(t, s))
	}
	sort.Strings(out)
	return out
}

// refusalKind guesses the kind of refusal a message of Plan or
// HeldConflict is, from the words each kind's message has: for comparing
// what simulate's prepare said (through gRPC, as text) with check's
// prediction.
func refusalKind(msg string) string {
	for _, k := range []struct{ kind, words string }{
		{"mps-multiple-devices", "a claim may use MPS on one device only"},
		{"mps-limit-key", "perDevicePinnedMemoryLimits"},
		{"mps-unavailable", "MPS is not available"},
		{"sharing-conflict", "is shared with ResourceClaim"},
		{"monitor-without-admin", "is for monitoring only"},
		{"config-kind", "(config: "},
	} {
		if strings.Contains(msg, k.words) {
			return k.kind
		}
	}
	return "other"
}

// findingsNotSimulated are the kinds of findings no corpus case can run
// through gpudra simulate, and why: simulate's fake API server validates
// nothing, so what the real one rejects cannot be compared there (the
// e2e scenario CheckAgreesWithAPIServer compares it with a real one).
var findingsNotSimulated = map[FindingKind]string{
	FindingCompile:      "the API server rejects a selector that does not compile",
	FindingCostLimit:    "the API server rejects a selector over the cost limit",
	FindingTooLong:      "the API server rejects a selector over the length limit",
	FindingUnknownField: "kubectl's strict field validation rejects the object",
	// The fake API server does not validate pods' resources.
	FindingInvalidExtendedResource: "the API server rejects the pod for its extended resources",
	FindingEmptyInventory:          "simulate always runs a profile's fake GPUs",
	FindingNodeNameClaim:           "simulate schedules every pod; it binds none by spec.nodeName",
	FindingTooManyClaimUsers:       "simulate's fake API server does not hold status.reservedFor to 256 entries",
	FindingQuotaExceeded:           "simulate's fake API server has no quota admission",
	FindingSkipped:                 "a custom resource check does not read: nothing to run",
	FindingConverted:               "a note on the API version of an object that runs as v1",
	FindingNotApplied:              "a note on an object that needs a feature gate off by default",
	// Until simulate's fake nodes publish NVLink domains and
	// gpudra-controller's channel pools run in it (issue 28, items 2-3).
	FindingChannelWithoutGang:        "simulate's fake nodes have no NVLink domains or IMEX channel pools yet",
	FindingSharedClaimFirst:          "simulate schedules pods one at a time, without kube-scheduler's pod-group cycle, where the swap happens",
	FindingGangWithoutDomainTopology: "simulate's fake nodes have no NVLink domains or IMEX channel pools, and it runs no pod-group cycle",
	FindingWaitsForSpare:             "simulate runs one node that keeps a spare, no gpudra-controller to give one, and no pod-group cycle: it prepares each pod before the next",
}

// TestEveryFindingKindSimulated: every kind of finding is either shown by
// a corpus case that the differential test runs through gpudra simulate
// (TestCheckAgreesWithSimulate), or says why simulate cannot run it.
func TestEveryFindingKindSimulated(t *testing.T) {
	simulated := map[FindingKind][]string{}
	for _, c := range loadCorpus(t) {
		if strings.HasPrefix(c.simulate, "skip") {
			continue
		}
		for _, f := range c.findings {
			simulated[f.kind] = append(simulated[f.kind], filepath.Base(c.file))
		}
	}
	for _, k := range findingKinds(t) {
		why, listed := findingsNotSimulated[k]
		switch {
		case !listed && len(simulated[k]) == 0:
			t.Errorf("finding %s: no corpus case that simulate runs shows it; add one, or say in findingsNotSimulated why simulate cannot", k)
		case listed && len(simulated[k]) > 0:
			t.Errorf("finding %s: listed as %q, yet simulated corpus cases %v show it", k, why, simulated[k])
		}
	}
}

// findingKinds are the FindingKind constants report.go declares.
func findingKinds(t *testing.T) []FindingKind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "report.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []FindingKind
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "FindingKind" {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					kinds = append(kinds, FindingKind(strings.Trim(lit.Value, `"`)))
				}
			}
		}
	}
	if len(kinds) < 20 {
		t.Fatalf("found only %d finding kinds in report.go", len(kinds))
	}
	return kinds
}
