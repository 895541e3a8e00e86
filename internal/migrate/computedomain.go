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

package migrate

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/textsafe"
)

// NVIDIA's ComputeDomains and gpudra's NVLink channels.
//
// NVIDIA's ComputeDomain (resource.nvidia.com/v1beta1, the CRD of
// kubernetes-sigs/dra-driver-nvidia-gpu@95932046:
// api/nvidia.com/resource/v1beta1/computedomain.go) names a
// ResourceClaimTemplate, spec.channel.resourceClaimTemplate.name, that its
// controller creates in the ComputeDomain's namespace
// (templates/compute-domain-workload-claim-template.tmpl.yaml: one request
// "channel" of DeviceClass compute-domain-default-channel.nvidia.com, with
// a ComputeDomainChannelConfig naming the domain), and a DaemonSet of IMEX
// daemons, each with a claim of compute-domain-daemon.nvidia.com. Every
// pod names the template, so every pod gets its own claim, for channel 0
// of its node (spec.channel.allocationMode All: all of the node's channel
// device nodes, while the scheduler counts one).
//
// gpudra's equivalent is a claim for one IMEX channel of an NVLink domain
// (docs/nvlink.md): DeviceClass nvlink-channel.gpudra.io, one channel of
// its own per job, which the scheduler allocates from the domain's pool
// and whose node selector fences the job's pods into that domain; or
// nvlink-shared.gpudra.io, channel 0, which every job that asks for it
// shares. The IMEX daemons are gpudra's own, one per node, started before
// any job: nothing in a workload's manifests stands for them.
//
// A ComputeDomain becomes the template it named, so that the pods that
// name it keep working. Which class the template asks for depends on who
// names it: pods that each get their own claim from it (a workload's pod
// template, unless its PodGroup lists that claim) would each get a
// different exclusive channel, and could not share memory; they get the
// shared channel 0, as NVIDIA gave each of them channel 0. A bare Pod, or
// pods whose PodGroup lists the claim (one claim for the group), get an
// exclusive channel.

const (
	computeDomainKind = "ComputeDomain"
	// NVIDIA's classes of the ComputeDomain driver (the chart's
	// templates/deviceclass-compute-domain-*.yaml) and of the network
	// channel pools it published from Oct 2024 to Feb 2025
	// (deviceclass-imex.yaml of cd399adc: type == 'imex-channel').
	cdChannelClass = "compute-domain-default-channel.nvidia.com"
	cdDaemonClass  = "compute-domain-daemon.nvidia.com"
	imexClass      = "imex.nvidia.com"
	// The request name of NVIDIA's workload template.
	channelRequest = "channel"
)

// chartClass names one of the chart's classes as it names them for the
// driver name: <prefix>.gpudra.io, or <prefix>.<driver name> beside
// another installation (templates/deviceclasses.yaml).
func (m *migrator) chartClass(prefix string) string {
	if m.opts.DriverName == gpu.DefaultDriverName {
		return prefix + ".gpudra.io"
	}
	return prefix + "." + m.opts.DriverName
}

func (m *migrator) channelClass() string { return m.chartClass("nvlink-channel") }
func (m *migrator) sharedClass() string  { return m.chartClass("nvlink-shared") }

// templateRef is a ResourceClaimTemplate by namespace and name ("" and
// "default" are one namespace).
type templateRef struct{ namespace, name string }

func refOf(namespace, name string) templateRef {
	if namespace == "default" {
		namespace = ""
	}
	return templateRef{namespace, name}
}

// perPodUse is an object whose pods each get their own claim from a
// template: a workload's pod template, unless its PodGroup holds the
// claim.
type perPodUse struct {
	object string // "MPIJob nvbandwidth-test"
	field  string
}

// inputs is what migrate learns from all its inputs before it changes
// one: the templates the ComputeDomains name, and who names them.
type inputs struct {
	// perPod: for each template, the objects whose pods each take a
	// claim of their own from it.
	perPod map[templateRef][]perPodUse
	// groupClaims are the PodGroups' claims from templates, by
	// "namespace/podgroup/claim name" → template; grouped are the pod
	// templates' references made in a PodGroup's pods, resolved against
	// them once every input is read.
	groupClaims map[string]string
	grouped     []groupedRef
}

type groupedRef struct {
	group, claim string // "namespace/podgroup", the pod's claim name
	ref          templateRef
	use          perPodUse
}

// scanInputs reads every document of the inputs for the references to
// claim templates that decide which channel class a ComputeDomain's
// template asks for. Documents that do not parse are skipped here (the
// migration reports them).
func scanInputs(in []scheduler.File) *inputs {
	s := &inputs{perPod: map[templateRef][]perPodUse{}, groupClaims: map[string]string{}}
	for _, f := range in {
		for _, d := range scheduler.SplitDocuments(f.Data) {
			var root yaml.Node
			if scheduler.OnlyComments(d.Text) || scheduler.IsTemplate(d.Text) || yaml.Unmarshal(d.Text, &root) != nil || len(root.Content) == 0 {
				continue
			}
			s.scanObject(root.Content[0])
		}
	}
	// A pod's claim is its PodGroup's (one for all the group's pods) when
	// the group lists a claim of that name from the same template, as
	// the resourceclaim controller requires; otherwise it is the pod's own.
	for _, g := range s.grouped {
		if s.groupClaims[g.group+"/"+g.claim] != g.ref.name {
			s.perPod[g.ref] = append(s.perPod[g.ref], g.use)
		}
	}
	return s
}

func (s *inputs) scanObject(obj *yaml.Node) {
	kind := str(get(obj, "kind"))
	if items := get(obj, "items"); items != nil && strings.HasSuffix(kind, "List") && items.Kind == yaml.SequenceNode {
		for _, it := range items.Content {
			s.scanObject(it)
		}
		return
	}
	meta := get(obj, "metadata")
	name := strings.TrimSpace(kind + " " + str(get(meta, "name")))
	ns := refOf(str(get(meta, "namespace")), "").namespace
	if kind == "PodGroup" {
		for _, c := range items(get(get(obj, "spec"), "resourceClaims")) {
			if t := str(get(c, "resourceClaimTemplateName")); t != "" {
				s.groupClaims[ns+"/"+str(get(meta, "name"))+"/"+str(get(c, "name"))] = t
			}
		}
		return
	}
	if kind == "Pod" {
		return // one pod, one claim: an exclusive channel serves it
	}
	walkPodSpecs(obj, "", func(spec *yaml.Node, field string) {
		group := str(get(get(spec, "schedulingGroup"), "podGroupName"))
		for i, c := range items(get(spec, "resourceClaims")) {
			t := str(get(c, "resourceClaimTemplateName"))
			if t == "" {
				t = str(get(get(c, "source"), "resourceClaimTemplateName"))
			}
			if t == "" {
				continue
			}
			ref := refOf(ns, t)
			use := perPodUse{object: name, field: fmt.Sprintf("%s.resourceClaims[%d]", field, i)}
			if group != "" {
				s.grouped = append(s.grouped, groupedRef{group: ns + "/" + group, claim: str(get(c, "name")), ref: ref, use: use})
				continue
			}
			s.perPod[ref] = append(s.perPod[ref], use)
		}
	})
}

// walkPodSpecs calls fn on every mapping that holds a pod spec's
// resourceClaims list, wherever it is in the object (a workload's
// template, a custom resource's).
func walkPodSpecs(n *yaml.Node, path string, fn func(spec *yaml.Node, field string)) {
	switch n.Kind {
	case yaml.MappingNode:
		if rc := get(n, "resourceClaims"); rc != nil && rc.Kind == yaml.SequenceNode && get(n, "containers") != nil {
			fn(n, path)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkPodSpecs(n.Content[i+1], joinField(path, n.Content[i].Value), fn)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walkPodSpecs(c, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// channelClassFor picks the class for the template: the shared channel
// when pods take claims of their own from it, else an exclusive one.
func (m *migrator) channelClassFor(ref templateRef) (class, why string) {
	uses := m.in.perPod[ref]
	if len(uses) == 0 {
		return m.channelClass(), fmt.Sprintf("one IMEX channel of an NVLink domain for the job alone (DeviceClass %s): the scheduler picks the domain and the channel, and the claim's node selector keeps the job's pods in that domain; for NVIDIA's sharing of channel 0 by every job of the domain, ask for DeviceClass %s instead", m.channelClass(), m.sharedClass())
	}
	var who []string
	for _, u := range uses {
		who = append(who, u.object)
	}
	return m.sharedClass(), fmt.Sprintf("channel 0 of an NVLink domain, shared (DeviceClass %s): the pods of %s each get their own claim from this template, and exclusive channels (DeviceClass %s) would give each pod a different one; NVIDIA gave each of them channel 0 likewise, and keeping them in one domain (one clique) is the job's affinity, as it was. For a channel of the job's own, give the job one claim of %s: list it in the job's PodGroup (resourceClaims, with schedulingGroup in the pod template; Kubernetes 1.37) or make it a ResourceClaim that every pod names, placed with a gang or Kueue TAS (docs/nvlink.md)", m.sharedClass(), strings.Join(unique(who), ", "), m.channelClass(), m.channelClass())
}

func unique(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// allocationModeAll says what NVIDIA's allocationMode All did and what
// gpudra does instead.
const allocationModeAll = "allocationMode All gave each pod all of its node's IMEX channel device nodes (2048) while the scheduler counted one; gpudra gives the claim one channel, the one the scheduler allocated: a workload that opens other channels than the one its container has (under /dev/nvidia-caps-imex-channels) must use that one"

// computeDomain replaces a ComputeDomain by the ResourceClaimTemplate it
// named. It returns the new document's text, or nil when the
// ComputeDomain names no template (then it is left as it is, reported).
func (m *migrator) computeDomain(obj *yaml.Node, original []byte) []byte {
	meta := get(obj, "metadata")
	ns := str(get(meta, "namespace"))
	channel := get(get(obj, "spec"), "channel")
	tmpl := str(get(get(channel, "resourceClaimTemplate"), "name"))
	if tmpl == "" {
		m.note(NoEquivalent, obj, "spec.channel.resourceClaimTemplate.name", "a ComputeDomain without a channel template: no pod can use it, and gpudra has nothing to make of it; left as it is")
		return nil
	}
	class, why := m.channelClassFor(refOf(ns, tmpl))
	m.note(Rewritten, obj, "", fmt.Sprintf("ComputeDomain → ResourceClaimTemplate %s, which the pods name already: %s", tmpl, why))
	if mode := get(channel, "allocationMode"); str(mode) == "All" {
		m.note(Rewritten, mode, "spec.channel.allocationMode", allocationModeAll)
	}
	if n := get(get(obj, "spec"), "numNodes"); n != nil {
		m.note(Rewritten, n, "spec.numNodes", "dropped: gpudra needs no node count; a gang (PodGroup) or Kueue TAS places the job's pods in one domain together, and the IMEX daemons of every node of the domain are running before the job comes")
	}
	m.note(Dropped, obj, "", "the ComputeDomain's IMEX daemons (NVIDIA's DaemonSet of them, their claims of "+cdDaemonClass+" and ComputeDomainCliques): gpudra runs one IMEX daemon on every node of an NVLink domain, before any job, so a job's manifests hold nothing for them")

	var b strings.Builder
	b.WriteString(leadingComments(original))
	fmt.Fprintf(&b, "# gpudra migrate: from ComputeDomain %s: the claim template it named, for %s\n", textsafe.Line(str(get(meta, "name"))), class)
	b.WriteString("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", yamlScalar(tmpl))
	if ns != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", yamlScalar(ns))
	}
	fmt.Fprintf(&b, "spec:\n  spec:\n    devices:\n      requests:\n      - name: %s\n        exactly:\n          deviceClassName: %s\n", channelRequest, class)
	b.WriteString(commentOut("the ComputeDomain it replaces, for reference:", stripLeadingComments(original)))
	m.changed = true
	return []byte(b.String())
}

// leadingComments are the comment lines a document starts with (a file's
// header): kept above what replaces it.
func leadingComments(text []byte) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(text), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		b.WriteString(l)
	}
	return b.String()
}

func stripLeadingComments(text []byte) []byte {
	return text[len(leadingComments(text)):]
}

// yamlScalar writes a name as a YAML scalar, quoted where plain would
// read otherwise.
func yamlScalar(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// nvidiaDroppedKinds are NVIDIA's custom resources that a workload's
// manifests need not carry on gpudra, and why.
var nvidiaDroppedKinds = map[string]string{
	"ComputeDomainClique": "NVIDIA's ComputeDomainClique, its IMEX daemons' record of one clique: gpudra's nodes carry their NVLink domain as the label gpu.gpudra.io/nvlink-domain, and gpudra-controller publishes a channel pool per domain",
}

// droppedIMEXClass says why one of NVIDIA's IMEX DeviceClasses is dropped,
// or "".
func (m *migrator) droppedIMEXClass(name string) string {
	switch name {
	case cdChannelClass, imexClass:
		return fmt.Sprintf("gpudra's chart installs %s (an IMEX channel of an NVLink domain for one job) and %s (channel 0, shared)", m.channelClass(), m.sharedClass())
	case cdDaemonClass:
		return daemonNote
	}
	return ""
}

const daemonNote = "the IMEX daemon of a ComputeDomain: gpudra runs one IMEX daemon on every node of an NVLink domain, before any job comes, so nothing claims one"

// imexRequest migrates a request for one of NVIDIA's IMEX classes and
// says whether the class was one.
func (m *migrator) imexRequest(c *yaml.Node, field, name string) bool {
	switch name {
	case cdChannelClass, imexClass:
		class, why := m.channelClass(), "one IMEX channel of an NVLink domain for the claim alone"
		if m.kind == "ResourceClaimTemplate" {
			class, why = m.channelClassFor(refOf(m.namespace, m.name))
		}
		if name == imexClass {
			why += " (" + imexClass + " selected the channels of NVIDIA's network-attached channel pools, channel 0 included)"
		}
		m.renameWhy(c, field, class, why)
		return true
	case cdDaemonClass:
		m.note(Dropped, c, field, daemonNote)
		m.dropWhy = "dropped a claim for NVIDIA's DeviceClass " + cdDaemonClass + ": " + daemonNote
		return true
	}
	return false
}

// channelConfig drops a ComputeDomainChannelConfig: it ties NVIDIA's
// claim to its ComputeDomain (domainID), and a gpudra channel needs no
// config.
func (m *migrator) channelConfig(cfgs, c, op *yaml.Node, field string) {
	params := get(op, "parameters")
	m.note(Rewritten, c, field, "ComputeDomainChannelConfig dropped: it tied the claim to a ComputeDomain (domainID); a gpudra channel needs no config, and the scheduler picks the NVLink domain")
	if mode := get(params, "allocationMode"); str(mode) == "All" {
		m.note(Rewritten, mode, field+".parameters.allocationMode", allocationModeAll)
	}
	if m.droppedConfigs == nil {
		m.droppedConfigs = map[*yaml.Node]bool{}
	}
	m.droppedConfigs[c] = true
	m.changed, m.restructured = true, true
}

// removeDropped takes the configs channelConfig dropped out of the list.
func (m *migrator) removeDropped(cfgs *yaml.Node) {
	if len(m.droppedConfigs) == 0 {
		return
	}
	kept := cfgs.Content[:0]
	for _, c := range cfgs.Content {
		if !m.droppedConfigs[c] {
			kept = append(kept, c)
		}
	}
	cfgs.Content = kept
}

// dropEmptyConfig removes a devices' config key left with no item.
func dropEmptyConfig(dev *yaml.Node) {
	if cfgs := get(dev, "config"); cfgs == nil || cfgs.Kind != yaml.SequenceNode || len(cfgs.Content) > 0 {
		return
	}
	for i := 0; i+1 < len(dev.Content); i += 2 {
		if dev.Content[i].Value == "config" {
			dev.Content = append(dev.Content[:i], dev.Content[i+2:]...)
			return
		}
	}
}

// renameWhy is rename with the reason in its note.
func (m *migrator) renameWhy(n *yaml.Node, field, to, why string) {
	if n.Value == to {
		return
	}
	m.note(Rewritten, n, field, fmt.Sprintf("%s → %s: %s", n.Value, to, why))
	m.edits = append(m.edits, edit{node: n, old: n.Value, new: to})
	n.Value = to
	m.changed = true
}

// items are a sequence's items; none for anything else.
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}
