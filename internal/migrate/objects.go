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
)

// migrator rewrites one document's node tree in place.
type migrator struct {
	opts       Options
	in         *inputs // what all the inputs hold
	file       string
	text       []byte   // the document's text
	lineOffset int      // the document's first line in the file, minus one
	lines      []string // the document's lines
	current    string
	changed    bool
	// edits are the scalars changed, for rewriting the text in place;
	// restructured is set when a change is more than renaming scalars
	// (an item dropped from a List), which only re-encoding can write.
	edits        []edit
	restructured bool
	// encoded: the document was written anew (its lines moved).
	encoded bool
	notes   []Note
	// replacement is the document's new text, where migrate writes
	// another object in its place (a ComputeDomain's claim template).
	replacement []byte
	// dropWhy, set while migrating a claim, drops its document (a claim
	// for NVIDIA's IMEX daemon).
	dropWhy string
	// droppedConfigs are the config items to take out (NVIDIA's
	// ComputeDomainChannelConfig).
	droppedConfigs map[*yaml.Node]bool
	// kind, namespace and name of the object being migrated.
	kind, namespace, name string
}

// edit is one scalar renamed: a key or value set to a new value, or a CEL
// expression whose names were rewritten.
type edit struct {
	node     *yaml.Node
	old, new string
	cel      bool
}

func (m *migrator) note(kind NoteKind, at *yaml.Node, field, msg string) {
	line := m.lineOffset + 1
	if at != nil && at.Line > 0 {
		line = m.lineOffset + at.Line
	}
	m.notes = append(m.notes, Note{File: m.file, Line: line, Object: m.current, Field: field, Kind: kind, Message: msg})
}

// object migrates one object (or the items of a List). It returns why
// the object is dropped, or "".
func (m *migrator) object(obj *yaml.Node, path string) string {
	if obj.Kind != yaml.MappingNode {
		return ""
	}
	apiVersion, kind := str(get(obj, "apiVersion")), str(get(obj, "kind"))
	group, version, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group, version = "", apiVersion
	}
	if kind == "" && get(obj, "mig-configs") != nil {
		m.note(NoEquivalent, obj, "", "a config of nvidia-mig-parted (MIG layouts applied to GPUs ahead of time), not a Kubernetes object: gpudra creates MIG partitions on demand, as claims ask for them, and leaves alone instances it did not make; drop it, and do not pre-partition the GPUs gpudra manages")
		return ""
	}
	if items := get(obj, "items"); items != nil && strings.HasSuffix(kind, "List") && items.Kind == yaml.SequenceNode {
		kept := items.Content[:0]
		for i, it := range items.Content {
			if why := m.object(it, joinField(path, fmt.Sprintf("items[%d]", i))); why != "" {
				m.changed, m.restructured = true, true
				continue
			}
			kept = append(kept, it)
		}
		items.Content = kept
		return ""
	}
	meta := get(obj, "metadata")
	name := str(get(meta, "name"))
	if ns := str(get(meta, "namespace")); ns != "" {
		name = ns + "/" + name
	}
	m.current = strings.TrimSpace(kind + " " + name)
	m.kind, m.namespace, m.name = kind, str(get(meta, "namespace")), str(get(meta, "name"))
	m.podClaims(obj, path)

	switch {
	case group == "resource.k8s.io" && version == "v1alpha2":
		m.note(NoEquivalent, obj, "apiVersion", "classic DRA (resource.k8s.io/v1alpha2, with resource classes and claim parameters) was removed in Kubernetes 1.32 and no release gpudra supports serves it; rewrite the claim with structured parameters (resource.k8s.io/v1): a request for DeviceClass "+m.gpuClass()+" or "+m.migClass()+" and, for sharing, an opaque GpuConfig or MigConfig")
	case group == "resource.k8s.io":
		m.toV1(obj, kind, version, path)
		switch kind {
		case "ResourceClaim":
			m.devices(get(get(obj, "spec"), "devices"), joinField(path, "spec.devices"))
			return m.dropWhy
		case "ResourceClaimTemplate":
			m.devices(get(get(get(obj, "spec"), "spec"), "devices"), joinField(path, "spec.spec.devices"))
			return m.dropWhy
		case "DeviceClass":
			return m.deviceClass(obj, str(get(meta, "name")), path)
		case "ResourceSlice":
			if d := get(get(obj, "spec"), "driver"); nvidiaDriver(str(d)) {
				m.note(Dropped, obj, "", fmt.Sprintf("a ResourceSlice of NVIDIA's driver %s: gpudra's kubelet plugin publishes its own", str(d)))
				return "dropped a ResourceSlice of NVIDIA's driver " + str(d)
			}
		case "DeviceTaintRule":
			m.taintRule(obj, path)
		}
	case group == nvidiaConfigGroup && kind == computeDomainKind && path == "":
		m.replacement = m.computeDomain(obj, m.text)
	case group == nvidiaConfigGroup:
		if why, ok := nvidiaDroppedKinds[kind]; ok {
			m.note(Dropped, obj, "", why)
			return "dropped " + why
		}
		if why, ok := nvidiaKinds[kind]; ok {
			m.note(NoEquivalent, obj, "", why)
		}
	case group == "gpu.resource.nvidia.com":
		m.note(NoEquivalent, obj, "", m.classicParameters(obj, kind))
	}
	return ""
}

// classicParameters says what to do with claim parameters of NVIDIA's
// classic DRA driver (GpuClaimParameters, MigDeviceClaimParameters), from
// what they hold: a count, a selector, sharing.
func (m *migrator) classicParameters(obj *yaml.Node, kind string) string {
	spec := get(obj, "spec")
	var parts []string
	if get(spec, "count") != nil {
		parts = append(parts, "its count becomes the request's count")
	}
	if get(spec, "selector") != nil {
		parts = append(parts, fmt.Sprintf("its selector becomes a CEL selector of the request on gpudra's attributes and capacities (e.g. device.capacity['%s'].memory.compareTo(quantity('16Gi')) <= 0, device.attributes['%s'].cudaComputeCapability.compareTo(semver('7.5.0')) >= 0)", m.opts.DriverName, m.opts.DriverName))
	}
	if get(spec, "sharing") != nil {
		parts = append(parts, "its sharing becomes the sharing of an opaque GpuConfig or MigConfig ("+configAPIVersion+") in the claim's config")
	}
	if get(spec, "profile") != nil {
		parts = append(parts, "its profile becomes a request for DeviceClass mig-<profile>."+strings.TrimPrefix(m.opts.DriverName, "gpu."))
	}
	msg := kind + " is the claim parameters of NVIDIA's classic DRA driver (resource.k8s.io/v1alpha2), which no Kubernetes release gpudra supports serves; rewrite the claim that used it as a ResourceClaim(Template) of resource.k8s.io/v1 with a request for DeviceClass " + m.gpuClass()
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	}
	return msg
}

// podClaims rewrites a pod spec's claim references of Kubernetes 1.26–1.30
// (resourceClaims[].source.resourceClaimName / resourceClaimTemplateName)
// as 1.31 and later take them, beside the name, wherever a pod spec is in
// the document (a Pod, a workload's template, a custom resource's).
func (m *migrator) podClaims(n *yaml.Node, path string) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinField(path, k.Value)
			if k.Value == "resourceClaims" && v.Kind == yaml.SequenceNode {
				for j, c := range v.Content {
					m.hoistSource(c, fmt.Sprintf("%s[%d]", p, j))
				}
				continue
			}
			m.podClaims(v, p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			m.podClaims(c, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// hoistSource moves a claim reference's source fields beside its name.
func (m *migrator) hoistSource(c *yaml.Node, field string) {
	src := get(c, "source")
	if c.Kind != yaml.MappingNode || src == nil || src.Kind != yaml.MappingNode {
		return
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(c.Content); i += 2 {
		if c.Content[i].Value == "source" {
			out = append(out, src.Content...)
			continue
		}
		out = append(out, c.Content[i], c.Content[i+1])
	}
	var moved []string
	for i := 0; i+1 < len(src.Content); i += 2 {
		moved = append(moved, src.Content[i].Value)
	}
	m.note(Rewritten, src, field+".source", fmt.Sprintf("source.%s → %s (Kubernetes 1.31 removed source)", strings.Join(moved, ", source."), strings.Join(moved, ", ")))
	c.Content = out
	m.changed, m.restructured = true, true
}

// toV1 rewrites a DeviceClass, ResourceClaim or ResourceClaimTemplate of
// a resource.k8s.io version no supported cluster serves by default
// (v1beta1, v1beta2, Kubernetes 1.31's v1alpha3) as resource.k8s.io/v1,
// as the API server converts it: v1beta2 has v1's shape; in v1beta1 and
// v1alpha3 a request's fields sit beside its name, and move under
// exactly.
func (m *migrator) toV1(obj *yaml.Node, kind, version, path string) {
	switch {
	case version != "v1beta1" && version != "v1beta2" && version != "v1alpha3":
		return
	case kind != "DeviceClass" && kind != "ResourceClaim" && kind != "ResourceClaimTemplate":
		return
	}
	if version != "v1beta2" {
		devices := get(get(obj, "spec"), "devices")
		field := "spec.devices"
		if kind == "ResourceClaimTemplate" {
			devices, field = get(get(get(obj, "spec"), "spec"), "devices"), "spec.spec.devices"
		}
		if reqs := get(devices, "requests"); reqs != nil && reqs.Kind == yaml.SequenceNode {
			for i, r := range reqs.Content {
				if m.requestToV1(r) {
					m.note(Rewritten, r, joinField(path, fmt.Sprintf("%s.requests[%d]", field, i)), "the request's fields moved under exactly, as in resource.k8s.io/v1")
				}
			}
		}
	}
	m.rename(get(obj, "apiVersion"), joinField(path, "apiVersion"), "resource.k8s.io/v1")
}

// requestToV1 moves every field of a v1beta1 request but its name and
// firstAvailable under exactly, and says whether it moved any.
func (m *migrator) requestToV1(r *yaml.Node) bool {
	if r == nil || r.Kind != yaml.MappingNode || get(r, "exactly") != nil {
		return false
	}
	exactly := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	var kept []*yaml.Node
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := r.Content[i], r.Content[i+1]
		if k.Value == "name" || k.Value == "firstAvailable" {
			kept = append(kept, k, v)
			continue
		}
		exactly.Content = append(exactly.Content, k, v)
	}
	if len(exactly.Content) == 0 {
		return false
	}
	r.Content = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "exactly"}, exactly)
	m.changed, m.restructured = true, true
	return true
}

// deviceClass migrates a DeviceClass: NVIDIA's own classes are dropped
// (gpudra's chart installs its equivalents), others get their selectors
// and configs rewritten.
func (m *migrator) deviceClass(obj *yaml.Node, name, path string) string {
	if ours, ok := m.classFor(name); ok {
		msg := fmt.Sprintf("NVIDIA's DeviceClass %s: gpudra's chart installs %s", name, ours)
		m.note(Dropped, obj, "", msg)
		return "dropped " + msg
	}
	if why, ok := nvidiaClassesWithoutEquivalent[name]; ok {
		m.note(NoEquivalent, obj, "", fmt.Sprintf("NVIDIA's DeviceClass %s: %s; left as it is (it selects no device on a gpudra cluster)", name, why))
		return ""
	}
	if why := m.droppedIMEXClass(name); why != "" {
		msg := fmt.Sprintf("NVIDIA's DeviceClass %s: %s", name, why)
		m.note(Dropped, obj, "", msg)
		return "dropped " + msg
	}
	spec := get(obj, "spec")
	if ext := str(get(spec, "extendedResourceName")); ext != "" && m.opts.DriverName == gpu.DefaultDriverName && strings.HasSuffix(name, "."+nvidiaDriverName) {
		if ours := builtinExtendedResources()[ext]; ours != "" {
			msg := fmt.Sprintf("DeviceClass %s, written for NVIDIA's driver: gpudra's chart installs DeviceClass %s, which maps the same extended resource %s (two classes that map one name leave the choice between them to the scheduler)", name, ours, ext)
			m.note(Dropped, obj, "", msg)
			return "dropped " + msg
		}
	}
	m.selectors(get(spec, "selectors"), joinField(path, "spec.selectors"))
	m.configs(get(spec, "config"), joinField(path, "spec.config"))
	return ""
}

func (m *migrator) taintRule(obj *yaml.Node, path string) {
	sel := get(get(obj, "spec"), "deviceSelector")
	if d := get(sel, "driver"); d != nil && str(d) == nvidiaDriverName {
		m.rename(d, joinField(path, "spec.deviceSelector.driver"), m.opts.DriverName)
	}
}

// devices migrates a claim's spec.devices: requests, constraints and
// configs.
func (m *migrator) devices(dev *yaml.Node, path string) {
	if dev == nil {
		return
	}
	if reqs := get(dev, "requests"); reqs != nil && reqs.Kind == yaml.SequenceNode {
		for i, r := range reqs.Content {
			p := joinField(path, fmt.Sprintf("requests[%d]", i))
			m.exactRequest(r, p) // v1beta1: the request itself
			m.exactRequest(get(r, "exactly"), p+".exactly")
			if subs := get(r, "firstAvailable"); subs != nil && subs.Kind == yaml.SequenceNode {
				for j, s := range subs.Content {
					m.exactRequest(s, fmt.Sprintf("%s.firstAvailable[%d]", p, j))
				}
			}
		}
	}
	if cons := get(dev, "constraints"); cons != nil && cons.Kind == yaml.SequenceNode {
		for i, c := range cons.Content {
			for _, key := range []string{"matchAttribute", "distinctAttribute"} {
				if a := get(c, key); a != nil {
					m.qualifiedName(a, fmt.Sprintf("%s.constraints[%d].%s", path, i, key))
				}
			}
		}
	}
	if m.dropWhy != "" {
		return // the claim is dropped, its configs with it
	}
	m.configs(get(dev, "config"), joinField(path, "config"))
	dropEmptyConfig(dev)
}

// exactRequest migrates the fields of one request (or subrequest) that
// name a class or the driver's attributes.
func (m *migrator) exactRequest(r *yaml.Node, path string) {
	if r == nil || r.Kind != yaml.MappingNode {
		return
	}
	mig := false
	if c := get(r, "deviceClassName"); c != nil {
		field := path + ".deviceClassName"
		name := str(c)
		mig = name == "mig.nvidia.com"
		if ours, ok := m.classFor(name); ok {
			m.rename(c, field, ours)
		} else if m.imexRequest(c, field, name) {
			// an IMEX channel or daemon: handled
		} else if why, ok := nvidiaClassesWithoutEquivalent[name]; ok {
			m.note(NoEquivalent, c, field, fmt.Sprintf("DeviceClass %s: %s", name, why))
		}
	}
	m.selectorsOf(get(r, "selectors"), path+".selectors", mig)
	if caps := get(get(r, "capacity"), "requests"); caps != nil && caps.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(caps.Content); i += 2 {
			k := caps.Content[i]
			field := fmt.Sprintf("%s.capacity.requests[%s]", path, k.Value)
			if k.Value == "shares" || k.Value == nvidiaDriverName+"/shares" {
				m.note(NoEquivalent, k, field, "NVIDIA's integer shares of a GPU (--consumable-shares=<n>): gpudra shares a GPU by its capacities instead: request capacity memory (e.g. memory: 10Gi) and, optionally, multiprocessors, on a node pool with consumableCapacity.enabled")
				continue
			}
			m.qualifiedName(k, field)
		}
	}
}

func (m *migrator) selectors(sels *yaml.Node, path string) { m.selectorsOf(sels, path, false) }

// selectorsOf migrates selectors; mig says they are a MIG request's.
func (m *migrator) selectorsOf(sels *yaml.Node, path string, mig bool) {
	if sels == nil || sels.Kind != yaml.SequenceNode {
		return
	}
	for i, s := range sels.Content {
		e := get(get(s, "cel"), "expression")
		if e == nil || e.Kind != yaml.ScalarNode {
			continue
		}
		field := fmt.Sprintf("%s[%d].cel.expression", path, i)
		out, changes, missing := rewriteCEL(e.Value, m.opts.DriverName)
		if mig || migType.MatchString(e.Value) {
			missing = append(missing, migIdentity(e.Value)...)
		}
		for _, msg := range missing {
			m.note(NoEquivalent, e, field, msg)
		}
		if out != e.Value {
			m.edits = append(m.edits, edit{node: e, old: e.Value, new: out, cel: true})
			e.Value = out
			m.changed = true
			m.note(Rewritten, e, field, strings.Join(changes, "; "))
		}
	}
}

// configs migrates the opaque configs of a claim or class.
func (m *migrator) configs(cfgs *yaml.Node, path string) {
	if cfgs == nil || cfgs.Kind != yaml.SequenceNode {
		return
	}
	for i, c := range cfgs.Content {
		op := get(c, "opaque")
		if op == nil {
			continue
		}
		field := fmt.Sprintf("%s[%d].opaque", path, i)
		driver := get(op, "driver")
		switch d := str(driver); {
		case d == nvidiaDriverName:
			if m.parameters(get(op, "parameters"), field+".parameters") {
				m.rename(driver, field+".driver", m.opts.DriverName)
			}
		case d == computeDomainDriverName && str(get(get(op, "parameters"), "kind")) == "ComputeDomainChannelConfig":
			m.channelConfig(cfgs, c, op, field)
		case d == computeDomainDriverName:
			m.note(NoEquivalent, driver, field+".driver", "a config for NVIDIA's ComputeDomain driver (multi-node NVLink, IMEX): gpudra has no equivalent")
		}
	}
	m.removeDropped(cfgs)
}

// blockText is the text of a block scalar as written, without its
// indentation: its lines from the one after the indicator while they are
// blank or indented at least as much as the first.
func (m *migrator) blockText(n *yaml.Node) string {
	var out []string
	indent := -1
	for _, l := range m.lines[min(n.Line, len(m.lines)):] {
		t := strings.TrimLeft(l, " ")
		if t == "" {
			out = append(out, "")
			continue
		}
		in := len(l) - len(t)
		if indent < 0 {
			indent = in
		}
		if in < indent {
			break
		}
		out = append(out, l[indent:])
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

// rename sets a scalar to a new value and notes it.
func (m *migrator) rename(n *yaml.Node, field, to string) {
	if n.Value == to {
		return
	}
	m.note(Rewritten, n, field, fmt.Sprintf("%s → %s", n.Value, to))
	m.edits = append(m.edits, edit{node: n, old: n.Value, new: to})
	n.Value = to
	m.changed = true
}

// qualifiedName migrates an attribute or capacity name written with its
// domain ("gpu.nvidia.com/parentUUID").
func (m *migrator) qualifiedName(n *yaml.Node, field string) {
	domain, id, ok := strings.Cut(n.Value, "/")
	if !ok || domain != nvidiaDriverName {
		return
	}
	if to, ok := renamedAttributes[id]; ok {
		m.rename(n, field, to)
		return
	}
	if why, ok := attributesWithoutEquivalent(id); ok {
		m.note(NoEquivalent, n, field, fmt.Sprintf("%s: %s", n.Value, why))
		return
	}
	m.rename(n, field, m.opts.DriverName+"/"+id)
}

// get returns a mapping node's value for key, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// key returns a mapping node's key node for key, or nil.
func key(n *yaml.Node, k string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i]
		}
	}
	return nil
}

func str(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func joinField(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
