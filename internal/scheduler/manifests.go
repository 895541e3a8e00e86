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

package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"
)

// Object is one decoded input object, as the API server would store it:
// resource.k8s.io objects in v1, whatever version the input used.
type Object struct {
	Source Source
	Kind   string // DeviceClass, ResourceClaimTemplate, ResourceClaim, ResourceSlice, DeviceTaintRule or Pod
	Name   string // namespace/name for namespaced objects
	Obj    runtime.Object
	// Owner is set on a pod made from a workload's pod template:
	// "Deployment default/trainer". Replicas is how many such pods the
	// workload asks for (1 for a plain Pod).
	Owner    string
	Replicas int
	// Rejected: the API server rejects the object (a Problem says why);
	// it is read on, so that the rest of it is checked too, but never
	// allocated.
	Rejected bool
}

// Ignored is an object that has nothing for the scheduler's DRA plugin.
type Ignored struct {
	Source Source
	Kind   string // as written, with its apiVersion: "ConfigMap (v1)"
	Name   string
	Reason string
}

func (i Ignored) String() string {
	s := fmt.Sprintf("%s: %s %s", i.Source, i.Kind, i.Name)
	if i.Reason != "" {
		s += ": " + i.Reason
	}
	return s
}

// Manifests are the objects read from YAML or JSON files.
type Manifests struct {
	Classes    []Object // *resourceapi.DeviceClass
	Templates  []Object // *resourceapi.ResourceClaimTemplate
	Claims     []Object // *resourceapi.ResourceClaim
	Pods       []Object // *v1.Pod, plain or from a workload's pod template
	Slices     []Object // *resourceapi.ResourceSlice
	TaintRules []Object // *resourceapi.DeviceTaintRule
	// Nodes are Node objects: the labels, taints and cordons the
	// scheduler's node filters read (PodFitsNode).
	Nodes []Object // *v1.Node
	// PodGroups (scheduling.k8s.io/v1beta1) make their pods gangs and
	// may hold claims for the whole group.
	PodGroups []Object // *schedulingv1beta1.PodGroup
	// Namespaces are read for their labels (admin access).
	Namespaces []Object // *v1.Namespace
	// Quotas are ResourceQuotas: what the API server lets a namespace's
	// claims ask for.
	Quotas []Object // *v1.ResourceQuota
	// Ignored lists the objects with nothing to check (Namespaces,
	// ConfigMaps, custom resources, ...).
	Ignored []Ignored
	// Problems lists what the API server would reject or drop, and notes
	// about objects that were converted or skipped.
	Problems []Problem
	// Written are every object read, as written (the items of a List one
	// by one), for tools that hand them to an API server.
	Written []Written
}

// Written is one object as written: its JSON and where it is.
type Written struct {
	Source Source
	JSON   []byte
}

// Empty says whether nothing was read that the scheduler could use.
func (m *Manifests) Empty() bool {
	return len(m.Classes)+len(m.Templates)+len(m.Claims)+len(m.Pods)+len(m.Slices)+len(m.TaintRules) == 0
}

// Merge appends other's objects to m.
func (m *Manifests) Merge(other *Manifests) {
	m.Classes = append(m.Classes, other.Classes...)
	m.Templates = append(m.Templates, other.Templates...)
	m.Claims = append(m.Claims, other.Claims...)
	m.Pods = append(m.Pods, other.Pods...)
	m.Slices = append(m.Slices, other.Slices...)
	m.TaintRules = append(m.TaintRules, other.TaintRules...)
	m.Nodes = append(m.Nodes, other.Nodes...)
	m.PodGroups = append(m.PodGroups, other.PodGroups...)
	m.Namespaces = append(m.Namespaces, other.Namespaces...)
	m.Quotas = append(m.Quotas, other.Quotas...)
	m.Ignored = append(m.Ignored, other.Ignored...)
	m.Problems = append(m.Problems, other.Problems...)
	m.Written = append(m.Written, other.Written...)
}

// strictCodecs decode like the API server with field validation Strict.
var strictCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)

// LoadPaths reads YAML or JSON files, and the *.yaml, *.yml and *.json
// files of directories (recursively), in the order given; a path "-" is
// stdin.
func LoadPaths(paths []string, stdin func() ([]byte, error)) (*Manifests, error) {
	files, err := ReadPaths(paths, stdin)
	if err != nil {
		return nil, err
	}
	m := &Manifests{}
	for _, f := range files {
		if err := m.Add(f.Name, f.Data); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// LoadFS reads every *.yaml, *.yml and *.json file of fsys (recursively,
// sorted), e.g. the DeviceClasses and examples built into the binary;
// messages name them prefix/file.
func LoadFS(fsys fs.FS, prefix string) (*Manifests, error) {
	m := &Manifests{}
	files, err := manifestFiles(fsys)
	if err != nil {
		return nil, err
	}
	if err := m.addFiles(fsys, prefix, files); err != nil {
		return nil, err
	}
	return m, nil
}

// manifestFiles lists the *.yaml, *.yml and *.json files of fsys,
// recursively, sorted.
func manifestFiles(fsys fs.FS) ([]string, error) {
	var files []string
	err := fs.WalkDir(fsys, ".", func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isManifestName(f) {
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	sort.Strings(files)
	return files, nil
}

func (m *Manifests) addFiles(fsys fs.FS, prefix string, files []string) error {
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return inputErrorf("%v", err)
		}
		if err := m.Add(path.Join(prefix, f), data); err != nil {
			return err
		}
	}
	return nil
}

func isManifestName(f string) bool {
	switch strings.ToLower(filepath.Ext(f)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// splitDocuments splits a multi-document YAML stream at "---" lines,
// keeping line numbers.
func splitDocuments(data []byte) []*document {
	var docs []*document
	start, startLine := 0, 1
	line := 1
	for i := 0; i <= len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data) + 1
		if end >= 0 {
			end += i
			next = end + 1
		} else {
			end = len(data)
		}
		l := bytes.TrimRight(data[i:end], " \t\r")
		if bytes.Equal(l, []byte("---")) || bytes.HasPrefix(l, []byte("--- ")) {
			docs = append(docs, &document{line: startLine, text: data[start:i]})
			start, startLine = next, line+1
			if start > len(data) {
				start = len(data)
			}
		}
		i = next
		line++
	}
	return append(docs, &document{line: startLine, text: data[start:]})
}

// leadingComments counts the comment and blank lines a document starts
// with, so that an object's line is that of its first field.
func leadingComments(doc []byte) int {
	n := 0
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return n
		}
		n++
	}
	return 0
}

func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// Add decodes every document of one file. Malformed YAML, a document that
// is not a mapping, or a file without any document is an InputError; what
// the API server would reject about one object is a Problem, and the other
// objects are still read.
func (m *Manifests) Add(file string, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return inputErrorf("%s: the file is empty", file)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return inputErrorf("%s: not a text file (it contains NUL bytes)", file)
	}
	objects, notObjects := 0, 0
	for i, doc := range splitDocuments(data) {
		if onlyComments(doc.text) {
			continue
		}
		src := Source{File: file, Document: i, Line: doc.line + leadingComments(doc.text), doc: doc}
		js, err := sigsyaml.YAMLToJSON(doc.text)
		if err != nil {
			if IsTemplate(doc.text) {
				return inputErrorf("%s: a Go template (a Helm chart's?), not a manifest: render it first (helm template RELEASE CHART | gpudra check -) and check what it renders to", src)
			}
			return inputErrorf("%s: malformed YAML: %s", src, yamlError(err, doc.line))
		}
		if isObject(js) {
			objects++
		} else {
			notObjects++
		}
		if err := m.addObject(src, js); err != nil {
			return err
		}
	}
	switch {
	case objects == 0 && notObjects > 0:
		return inputErrorf("%s: the file holds no Kubernetes objects (no document has apiVersion and kind): a kustomization or a Helm values file? Check what it renders to: kubectl kustomize, helm template", file)
	case objects == 0:
		return inputErrorf("%s: the file holds no objects (only comments or empty documents)", file)
	}
	return nil
}

// typeMeta is what every object starts with.
type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (t typeMeta) name() string { return ObjectName(t.Kind, t.Metadata.Namespace, t.Metadata.Name) }

// ObjectName names an object as findings name it: namespace/name, with
// the namespace kubectl gives a namespaced kind this package reads when
// the object has none ("default"), or the name alone.
func ObjectName(kind, namespace, name string) string {
	switch {
	case namespace != "":
		return namespace + "/" + name
	case namespacedKinds[kind] && name != "":
		return metav1.NamespaceDefault + "/" + name
	}
	return name
}

// namespacedKinds are the namespaced kinds this package reads: without a
// namespace, kubectl puts them in "default".
var namespacedKinds = map[string]bool{
	"ResourceClaim": true, "ResourceClaimTemplate": true, "Pod": true, "Deployment": true, "ReplicaSet": true,
	"StatefulSet": true, "DaemonSet": true, "ReplicationController": true, "Job": true, "CronJob": true,
	"ResourceQuota": true,
}

// addObject decodes one object (or the items of a List).
func (m *Manifests) addObject(src Source, js []byte) error {
	var meta typeMeta
	if err := json.Unmarshal(js, &meta); err != nil {
		return inputErrorf("%s: not a Kubernetes object (a YAML mapping with apiVersion and kind): %v", src, err)
	}
	object := strings.TrimSpace(meta.Kind + " " + meta.name())
	switch {
	case meta.Kind == "" && meta.APIVersion == "":
		m.Problems = append(m.Problems, Problem{Kind: ProblemInvalid, Source: src,
			Message: "not a Kubernetes object (no apiVersion, no kind): kubectl apply rejects the file",
			Hint:    "if it is a kustomization or a Helm values file, keep it out of what you apply and check what it renders to (kubectl kustomize, helm template)"})
		return nil
	case meta.Kind == "":
		m.problem(ProblemInvalid, src, object, "kind", "kind is required; the API server rejects the object", "")
		return nil
	case meta.APIVersion == "":
		m.problem(ProblemInvalid, src, object, "apiVersion", "apiVersion is required; the API server rejects the object", "")
		return nil
	}
	if meta.Kind == "List" || strings.HasSuffix(meta.Kind, "List") && meta.Items != nil {
		for i, item := range meta.Items {
			if err := m.addObject(src.within(fmt.Sprintf("items[%d]", i)), item); err != nil {
				return err
			}
		}
		return nil
	}
	m.Written = append(m.Written, Written{Source: src, JSON: js})
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		m.problem(ProblemInvalid, src, object, "apiVersion", fmt.Sprintf("apiVersion %q: %v", meta.APIVersion, err), "")
		return nil
	}
	gvk := gv.WithKind(meta.Kind)
	if gv.Group == resourceapi.GroupName && gv.Version != "v1" {
		obj, ok := m.convert(src, gvk, meta.name(), js)
		if ok {
			m.add(src, meta.Kind, obj, object)
		}
		return nil
	}
	if want, ok := workloadVersions[gvk.Kind]; ok && want != gv.String() && (gv.Group == "apps" || gv.Group == "extensions" || gv.Group == "batch") {
		m.problem(ProblemInvalid, src, object, "apiVersion", fmt.Sprintf("%s %s is not served by any Kubernetes release gpudra supports", gv, gvk.Kind), "use apiVersion "+want)
		return nil
	}
	if !scheme.Scheme.Recognizes(gvk) {
		m.unknownKind(src, gvk, meta.name())
		return nil
	}
	obj, ok := m.decode(src, object, js)
	if !ok {
		return nil
	}
	if pod, owner, replicas, path, ok := podTemplate(obj); ok {
		pod.Namespace = namespaceOr(pod.Namespace, meta.Metadata.Namespace)
		rejected := m.validate(src, object, meta.Kind, validateObject(obj), "")
		rejected = m.validate(src, object, meta.Kind, validatePodTemplate(pod), path+".") || rejected
		rejected = m.resourceProblems(src, object, meta.Kind, extendedResourceErrors(&pod.Spec, path+".spec")) || rejected
		m.Pods = append(m.Pods, Object{Source: src.within(path), Kind: "Pod", Name: pod.Namespace + "/" + pod.Name, Obj: pod,
			Owner: meta.Kind + " " + pod.Namespace + "/" + meta.Metadata.Name + owner, Replicas: replicas, Rejected: rejected})
		return nil
	}
	m.add(src, meta.Kind, obj, object)
	return nil
}

// validate reports what the API server's validation rejects, each error
// at its field (prefix is where the fields are below the document), and
// says whether there was any.
func (m *Manifests) validate(src Source, object, kind string, errs field.ErrorList, prefix string) bool {
	for _, e := range errs {
		f := prefix + e.Field
		hint := ""
		if e.Type == field.ErrorTypeInvalid && (strings.HasSuffix(e.Field, "name") || strings.HasSuffix(e.Field, "Name")) {
			if v, ok := e.BadValue.(string); ok {
				hint = nameHint(v)
			}
		}
		m.problem(ProblemInvalid, src, object, f, fmt.Sprintf("%s; the API server rejects the %s", e.ErrorBody(), kind), hint)
	}
	return len(errs) > 0
}

// resourceProblems reports the extended resources the API server
// rejects, and says whether there was any.
func (m *Manifests) resourceProblems(src Source, object, kind string, errs []ResourceError) bool {
	for _, e := range errs {
		m.problem(ProblemExtendedResource, src, object, e.Field, fmt.Sprintf("%s; the API server rejects the %s", e.Message, kind), e.Hint)
	}
	return len(errs) > 0
}

func (m *Manifests) problem(kind ProblemKind, src Source, object, field, msg, hint string) {
	m.Problems = append(m.Problems, Problem{Kind: kind, Source: src.At(field), Object: object, Field: field, Message: msg, Hint: hint})
}

// decode decodes one object strictly; unknown and duplicate fields become
// problems, and an object that cannot be decoded at all is one too.
func (m *Manifests) decode(src Source, object string, js []byte) (runtime.Object, bool) {
	obj, _, err := strictCodecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil && !runtime.IsStrictDecodingError(err) {
		m.problem(ProblemInvalid, src, object, "", fmt.Sprintf("cannot be decoded, the API server rejects it: %v", err), "")
		return nil, false
	}
	m.strictProblems(src, object, err, "")
	return obj, true
}

var quotedField = regexp.MustCompile(`field "([^"]+)"`)

// claimSource is the pre-1.31 form of a pod's claim reference.
var claimSource = regexp.MustCompile(`(^|\.)resourceClaims\[\d+\]\.source$`)

// strictProblems reports the unknown and duplicated fields of a strict
// decoding error, each at its line.
func (m *Manifests) strictProblems(src Source, object string, err error, why string) {
	sde, ok := runtime.AsStrictDecodingError(err)
	if !ok {
		return
	}
	for _, e := range sde.Errors() {
		field := ""
		if f := quotedField.FindStringSubmatch(e.Error()); f != nil {
			field = f[1]
		}
		msg := "the API server rejects or drops this field: " + e.Error()
		if why != "" {
			msg = why + ": " + e.Error()
		}
		kind := strings.ToLower(strings.Fields(object + " x")[0])
		hint := "check the spelling against `kubectl explain " + kind + "`"
		if claimSource.MatchString(field) {
			msg = "resourceClaims[].source is the pod's claim reference of Kubernetes 1.26–1.30; from 1.31 on the pod names the claim or template directly, and the API server rejects source"
			hint = "move what source held beside name: resourceClaimTemplateName: <template> (was source.resourceClaimTemplateName) or resourceClaimName: <claim> (was source.resourceClaimName); gpudra migrate rewrites it"
		}
		m.Problems = append(m.Problems, Problem{Kind: ProblemUnknownField, Source: src.At(field), Object: object, Field: field,
			Message: msg, Hint: hint})
	}
}

// podGroupV1beta1 is a scheduling.k8s.io/v1alpha3 PodGroup, which 1.37
// serves beside v1beta1 with the same fields, as v1beta1 holds it: the
// API server converts between them, and a gang written either way is a
// gang. Its TypeMeta keeps the version it was written in, for messages.
func podGroupV1beta1(pg *schedulingv1alpha3.PodGroup) *schedulingv1beta1.PodGroup {
	out := &schedulingv1beta1.PodGroup{ObjectMeta: *pg.ObjectMeta.DeepCopy()}
	data, err := json.Marshal(pg.Spec)
	if err == nil {
		err = json.Unmarshal(data, &out.Spec)
	}
	if err != nil {
		// The two specs are the same fields (k8s.io/api scheduling);
		// a field one lacks is dropped as the API server's conversion
		// would refuse it.
		out.Spec = schedulingv1beta1.PodGroupSpec{}
	}
	out.APIVersion, out.Kind = schedulingv1alpha3.SchemeGroupVersion.String(), "PodGroup"
	return out
}

// add files a decoded object by type.
func (m *Manifests) add(src Source, kind string, obj runtime.Object, object string) {
	if pg, ok := obj.(*schedulingv1alpha3.PodGroup); ok {
		obj = podGroupV1beta1(pg)
	}
	o := Object{Source: src, Kind: kind, Obj: obj, Replicas: 1}
	o.Rejected = m.validate(src, object, kind, validateObject(obj), "")
	if pod, ok := obj.(*v1.Pod); ok {
		o.Rejected = m.resourceProblems(src, object, kind, extendedResourceErrors(&pod.Spec, "spec")) || o.Rejected
	}
	if acc, ok := obj.(interface {
		GetName() string
		GetNamespace() string
		SetNamespace(string)
	}); ok {
		o.Name = acc.GetName()
		switch obj.(type) {
		case *resourceapi.ResourceClaimTemplate, *resourceapi.ResourceClaim, *v1.Pod, *schedulingv1beta1.PodGroup, *v1.ResourceQuota:
			acc.SetNamespace(namespaceOr(acc.GetNamespace(), ""))
			o.Name = acc.GetNamespace() + "/" + o.Name
		}
	}
	switch obj.(type) {
	case *resourceapi.DeviceClass:
		m.Classes = append(m.Classes, o)
	case *resourceapi.ResourceClaimTemplate:
		m.Templates = append(m.Templates, o)
	case *resourceapi.ResourceClaim:
		m.Claims = append(m.Claims, o)
	case *v1.Pod:
		m.Pods = append(m.Pods, o)
	case *resourceapi.ResourceSlice:
		m.Slices = append(m.Slices, o)
	case *resourceapi.DeviceTaintRule:
		m.TaintRules = append(m.TaintRules, o)
	case *v1.Node:
		m.Nodes = append(m.Nodes, o)
	case *schedulingv1beta1.PodGroup:
		m.PodGroups = append(m.PodGroups, o)
	case *v1.Namespace:
		m.Namespaces = append(m.Namespaces, o)
	case *v1.ResourceQuota:
		m.Quotas = append(m.Quotas, o)
	default:
		gvk := obj.GetObjectKind().GroupVersionKind()
		m.Ignored = append(m.Ignored, Ignored{Source: src, Kind: fmt.Sprintf("%s (%s)", kind, gvk.GroupVersion()), Name: o.Name,
			Reason: "nothing for the scheduler's DRA plugin"})
	}
}

func namespaceOr(ns, def string) string {
	switch {
	case ns != "":
		return ns
	case def != "":
		return def
	}
	return "default"
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError drops the converter's prefix and turns the document's line
// numbers into the file's.
func yamlError(err error, docLine int) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+docLine-1)
	})
}

// isObject says whether a document (as JSON) is a Kubernetes object or a
// list of them: a mapping with an apiVersion or a kind.
func isObject(js []byte) bool {
	var meta typeMeta
	return json.Unmarshal(js, &meta) == nil && (meta.Kind != "" || meta.APIVersion != "")
}

// IsTemplate says whether a document holds Go template actions ({{ … }}):
// a Helm chart's template, which only its rendering turns into manifests.
func IsTemplate(doc []byte) bool {
	i := bytes.Index(doc, []byte("{{"))
	return i >= 0 && bytes.Contains(doc[i:], []byte("}}"))
}
