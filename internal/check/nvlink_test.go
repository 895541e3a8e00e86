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
	"strconv"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The NVLink inventory of these tests: five DGX H100 nodes (whole GPUs,
// eight each), node-1 and node-2 in domain A, node-3 to node-5 in domain
// B, each domain with a pool of 4 exclusive channels and the shared
// channel 0. It is made by hand (gpudratest.InNVLinkDomains) until the
// fake profiles carry fabric domains and gpudra-controller's pools can be
// built offline; the channel classes come from gpudratest.ChannelClasses
// until the chart's deviceclasses/ carry them.
var nvlinkDomainOf = map[string]string{
	"node-1": gpudratest.DomainA, "node-2": gpudratest.DomainA,
	"node-3": gpudratest.DomainB, "node-4": gpudratest.DomainB, "node-5": gpudratest.DomainB,
}

// checkNVLink checks YAML on that inventory; withNodes adds the Node
// objects (labelled with their domain) to the inputs, else check labels
// the inventory's nodes from their GPUs' nvlinkDomain attribute.
func checkNVLink(t *testing.T, yaml string, withNodes bool, sequential ...bool) *Report {
	t.Helper()
	in := &scheduler.Manifests{}
	if err := in.Add("input.yaml", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	o := nvlinkOptions(t, in, withNodes)
	o.Sequential = len(sequential) > 0 && sequential[0]
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// nvlinkOptions check the inputs on the NVLink inventory, adding its
// Node objects to them when withNodes is set.
func nvlinkOptions(t *testing.T, in *scheduler.Manifests, withNodes bool) Options {
	t.Helper()
	gpus := fakePoolInventory(t, fakenodes.DefaultProfile, 5, fakenodes.Pool{WholeGPUsOnly: true})
	slices, nodes := gpudratest.InNVLinkDomains(gpu.DefaultDriverName, 4, gpus, nvlinkDomainOf)
	if withNodes {
		for _, n := range nodes {
			data, err := sigsyaml.Marshal(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Add("nodes.yaml", append([]byte("apiVersion: v1\nkind: Node\n"), data...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return Options{Inputs: in, Slices: slices, SlicesSource: "5 DGX H100 nodes in 2 NVLink domains, made by hand", BuiltinClasses: true, ClusterClasses: gpudratest.ChannelClasses()}
}

// nvlinkGang is a gang Job of WORKERS pods, each on a whole node (eight
// GPUs), all sharing the PodGroup's claim for one IMEX channel.
const nvlinkGang = `
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: NAME, namespace: ml}
spec:
  schedulingPolicy:
    gang: {minCount: WORKERS}
  schedulingConstraints:
    topology: [{key: gpu.gpudra.io/nvlink-domain}]
  resourceClaims: [{name: nvlink, resourceClaimTemplateName: nvlink-domain}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: NAME, namespace: ml}
spec:
  parallelism: WORKERS
  template:
    spec:
      restartPolicy: Never
      schedulingGroup: {podGroupName: NAME}
      containers:
      - name: w
        image: x
        resources:
          claims: [{name: nvlink}, {name: gpus}]
      resourceClaims:
      - {name: gpus, resourceClaimTemplateName: eight-gpus}
      - {name: nvlink, resourceClaimTemplateName: nvlink-domain}
`

const nvlinkTemplates = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nvlink-domain, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly: {deviceClassName: nvlink-channel.gpudra.io}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight-gpus, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.gpudra.io, count: 8}
`

func gang(name string, workers int) string {
	return strings.NewReplacer("NAME", name, "WORKERS", strconv.Itoa(workers)).Replace(nvlinkGang)
}

// allocationsOf are the channels (pool/device) and the nodes of the GPUs
// that the claims whose names start with prefix were allocated.
func allocationsOf(rep *Report, prefix string) (channels map[string]bool, nodes []string) {
	channels = map[string]bool{}
	for _, c := range rep.Claims {
		if !strings.HasPrefix(c.Name, prefix) || c.Allocation == nil {
			continue
		}
		for _, d := range c.Allocation.Devices {
			if strings.HasPrefix(d.Pool, slicebuilder.ChannelPoolPrefix) {
				channels[d.Pool+"/"+d.Device] = true
			} else {
				nodes = append(nodes, c.Allocation.Node)
			}
		}
	}
	return channels, nodes
}

// TestNVLinkGangInOneDomain: a gang with a channel claim lands in one
// NVLink domain, the one with room for all of it (domain A, first, has
// two nodes; the gang of three goes to B), all its pods sharing one
// channel of that domain's pool; a second gang in the same domain gets
// another channel; a gang larger than any domain waits whole, holding
// nothing, and check says why.
func TestNVLinkGangInOneDomain(t *testing.T) {
	for _, withNodes := range []bool{true, false} {
		t.Run("nodes given="+strconv.FormatBool(withNodes), func(t *testing.T) {
			rep := checkNVLink(t, nvlinkTemplates+"---"+gang("big", 3)+"---"+gang("small", 2)+"---"+gang("huge", 4), withNodes)
			for name, want := range map[string]string{"ml/big-": gpudratest.DomainB, "ml/small-": gpudratest.DomainA} {
				channels, nodes := allocationsOf(rep, name)
				if len(nodes) == 0 || len(channels) != 1 {
					t.Errorf("%s: pods on %v with channels %v, want all pods on one channel", name, nodes, channels)
				}
				for _, n := range nodes {
					if nvlinkDomainOf[n] != want {
						t.Errorf("%s: a pod on %s, outside domain %s", name, n, want)
					}
				}
				for ch := range channels {
					if !strings.HasPrefix(ch, slicebuilder.ChannelPoolName(want)+"/") {
						t.Errorf("%s: channel %s is not of domain %s's pool", name, ch, want)
					}
				}
			}
			if channels, nodes := allocationsOf(rep, "ml/huge-"); len(channels)+len(nodes) > 0 {
				t.Errorf("the gang of 4 holds channels %v and GPUs on %v", channels, nodes)
			}
			found := false
			for _, f := range rep.Findings {
				if f.Kind == FindingUnsatisfiable && f.Object == "PodGroup ml/huge" {
					found = strings.Contains(f.Message, "fit together in no single NVLink domain")
				}
				if f.Severity == SeverityError && f.Object != "PodGroup ml/huge" && !strings.Contains(f.Message, "huge") {
					t.Errorf("unexpected finding: %s %s: %s", f.Kind, f.Object, f.Message)
				}
			}
			if !found {
				t.Errorf("no finding says the gang of 4 fits no domain:\n%s", reportText(rep))
			}
		})
	}
}

// TestNVLinkGangWithoutDomainTopology: a gang with a channel claim whose
// PodGroup gives no topology constraint on the domain label is a warning
// that names the constraint, since kube-scheduler then places it pod by
// pod; with the constraint it is a note on the feature gate instead, and
// a gang of one pod, which no first pod can fence, is neither.
func TestNVLinkGangWithoutDomainTopology(t *testing.T) {
	const constraint = "  schedulingConstraints:\n    topology: [{key: gpu.gpudra.io/nvlink-domain}]\n"
	if !strings.Contains(nvlinkGang, constraint) {
		t.Fatal("the test's gang has no topology constraint to take out")
	}
	without := strings.Replace(gang("big", 3), constraint, "", 1)
	for _, tc := range []struct {
		name, in    string
		warn, noted bool
	}{
		{"without the constraint", without, true, false},
		{"with it", gang("big", 3), false, true},
		{"a gang of one", strings.Replace(gang("one", 1), constraint, "", 1), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := checkNVLink(t, nvlinkTemplates+"---"+tc.in, true)
			var warned, noted bool
			for _, f := range rep.Findings {
				switch {
				case f.Kind == FindingGangWithoutDomainTopology:
					warned = true
					if f.Severity != SeverityWarning || !strings.Contains(f.Message, "the first pod's channel fixes the NVLink domain") ||
						!strings.Contains(f.Hint, "schedulingConstraints.topology: [{key: gpu.gpudra.io/nvlink-domain}]") {
						t.Errorf("finding %s %s: %s (hint %q)", f.Severity, f.Object, f.Message, f.Hint)
					}
				case f.Kind == FindingNotApplied && strings.Contains(f.Message, "TopologyAwareWorkloadScheduling"):
					noted = true
				}
			}
			if warned != tc.warn || noted != tc.noted {
				t.Errorf("warned %v, noted %v; want %v, %v:\n%s", warned, noted, tc.warn, tc.noted, reportText(rep))
			}
			// Either way check places the gang in the domain with room.
			if channels, _ := allocationsOf(rep, "ml/big-"); strings.Contains(tc.in, "big") && len(channels) != 1 {
				t.Errorf("the gang holds channels %v, want one", channels)
			}
		})
	}
}

// TestNVLinkTwoJobsTwoChannels: two gangs in one domain, checked as
// running together (--sequential), hold different channels (the class is
// exclusive); domain A has room for both.
func TestNVLinkTwoJobsTwoChannels(t *testing.T) {
	rep := checkNVLink(t, nvlinkTemplates+"---"+gang("one", 1)+"---"+gang("two", 1), true, true)
	a, _ := allocationsOf(rep, "ml/one-")
	b, _ := allocationsOf(rep, "ml/two-")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("channels %v and %v, want one each:\n%s", a, b, reportText(rep))
	}
	for ch := range a {
		if b[ch] {
			t.Errorf("both jobs hold channel %s", ch)
		}
	}
}

// TestNVLinkStandaloneClaimWithoutGang: a standalone channel claim that
// a Deployment's two pods share, outside a gang, is a warning that says
// what it risks; the same claim for a gang's pods is not.
func TestNVLinkStandaloneClaimWithoutGang(t *testing.T) {
	const claim = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: llm-nvlink, namespace: ml}
spec:
  devices:
    requests:
    - name: channel
      exactly: {deviceClassName: nvlink-channel.gpudra.io}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      SCHEDULING
      containers:
      - name: w
        image: x
        resources:
          claims: [{name: nvlink}]
      resourceClaims:
      - {name: nvlink, resourceClaimName: llm-nvlink}
`
	const podGroup = `
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: llm, namespace: ml}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
`
	for _, tc := range []struct {
		name, yaml string
		warn       bool
	}{
		{"no gang", strings.Replace(claim, "SCHEDULING", "", 1), true},
		{"a gang", strings.Replace(claim, "SCHEDULING", "schedulingGroup: {podGroupName: llm}", 1) + podGroup, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := checkNVLink(t, tc.yaml, true)
			var got []Finding
			for _, f := range rep.Findings {
				if f.Kind == FindingChannelWithoutGang {
					got = append(got, f)
				}
			}
			switch {
			case tc.warn && (len(got) != 1 || got[0].Severity != SeverityWarning || !strings.Contains(got[0].Message, "the first pod scheduled fixes the NVLink domain") || !strings.Contains(got[0].Hint, "PodGroup")):
				t.Errorf("want one warning that says what the claim risks and how to avoid it, got %+v", got)
			case !tc.warn && len(got) > 0:
				t.Errorf("a warning for a gang's claim: %+v", got)
			}
			if rep.ExitCode != 0 {
				t.Errorf("exit %d, want 0 (a warning counts only with --strict):\n%s", rep.ExitCode, reportText(rep))
			}
			channels, nodes := allocationsOf(rep, "ml/llm-nvlink")
			if len(channels) != 1 {
				t.Errorf("the claim holds channels %v (nodes %v), want one", channels, nodes)
			}
		})
	}
}

func reportText(rep *Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.Severity + " " + string(f.Kind) + ": " + f.Object + ": " + f.Message + "\n")
	}
	for _, c := range rep.Claims {
		b.WriteString("claim " + c.Name)
		if c.Allocation != nil {
			b.WriteString(" on " + c.Allocation.Node)
			for _, d := range c.Allocation.Devices {
				b.WriteString(" " + d.Pool + "/" + d.Device)
			}
		}
		b.WriteString(" " + strings.Join(c.Unsatisfiable, "; ") + "\n")
	}
	return b.String()
}
