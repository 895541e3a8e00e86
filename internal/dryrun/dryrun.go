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

// Package dryrun asks a real API server what it makes of gpudra check's
// inputs: each object is applied server-side with dryRun=All (what
// kubectl apply --server-side --dry-run=server does), so that the API
// server's own validation, admission (gpudra's webhook included) and
// defaulting judge it, and nothing is stored. gpudra check --server-dry-run
// adds what the server rejects to its report: the offline checks say what
// would happen on any gpudra cluster, this says what this one does.
package dryrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/gpudra/gpudra/internal/check"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// FieldManager is the field manager the dry runs apply as.
const FieldManager = "gpudra-check"

// FindingServerRejects: the API server rejects the object on a dry run.
const FindingServerRejects check.FindingKind = "server-rejects"

// Apply dry-runs every object of the inputs against the API server of
// cfg and returns what it rejects, as findings at the fields the server
// names. ResourceSlices are left out: they are the inventory, which the
// plugin publishes. An error means the server could not be asked at all.
func Apply(ctx context.Context, cfg *rest.Config, in *scheduler.Manifests) ([]check.Finding, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the API server %s: %w", cfg.Host, err)
	}
	if _, err := disc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("the API server %s does not answer: %w", cfg.Host, err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	inputNamespaces := map[string]bool{}
	for _, o := range in.Namespaces {
		inputNamespaces[o.Obj.(*v1.Namespace).Name] = true
	}
	host := cfg.Host
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		host = u.Host
	}
	var out []check.Finding
	for _, w := range in.Written {
		var u unstructured.Unstructured
		if err := json.Unmarshal(w.JSON, &u.Object); err != nil {
			continue // reported by the offline checks
		}
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || gvk.Kind == "ResourceSlice" {
			continue
		}
		object := u.GetKind() + " " + scheduler.ObjectName(u.GetKind(), u.GetNamespace(), u.GetName())
		f := check.Finding{Kind: FindingServerRejects, Severity: check.SeverityError, Source: w.Source, Object: object}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			f.Field = "apiVersion"
			f.Source = w.Source.At("apiVersion")
			f.Message = fmt.Sprintf("the API server %s serves no %s in %s (no CRD installed, or the version is off): kubectl apply fails", host, gvk.Kind, gvk.GroupVersion())
			out = append(out, f)
			continue
		}
		res := client.Resource(mapping.Resource)
		var target dynamic.ResourceInterface = res
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
				u.SetNamespace(ns)
			}
			target = res.Namespace(ns)
			object = u.GetKind() + " " + ns + "/" + u.GetName()
			f.Object = object
		}
		// A server-side apply, as kubectl apply --server-side does, with
		// kubectl's strict field validation: an unknown field is an error.
		force := true
		_, err = target.Patch(ctx, u.GetName(), types.ApplyPatchType, w.JSON, metav1.PatchOptions{
			DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager, Force: &force, FieldValidation: "Strict"})
		if err == nil {
			continue
		}
		rejected, err := rejections(f, w, err, host, inputNamespaces)
		if err != nil {
			return nil, err
		}
		out = append(out, rejected...)
	}
	return out, nil
}

// rejections are the findings of an object the dry run refused (err):
// one per cause the server gives, else one with its message; a note, not
// an error, when the object's namespace is among the inputs but not on
// the server. An error that is not the server's answer is returned.
func rejections(f check.Finding, w scheduler.Written, err error, host string, inputNamespaces map[string]bool) ([]check.Finding, error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil, fmt.Errorf("%s: dry run on %s: %w", w.Source, host, err)
	}
	st := status.Status()
	if apierrors.IsNotFound(err) && st.Details != nil && st.Details.Kind == "namespaces" && inputNamespaces[st.Details.Name] {
		f.Severity = check.SeverityNote
		f.Message = fmt.Sprintf("the API server %s could not check it: its namespace %s is among the inputs but not on the server, and a dry run creates nothing", host, st.Details.Name)
		return []check.Finding{f}, nil
	}
	if st.Details == nil || len(st.Details.Causes) == 0 {
		f.Message = fmt.Sprintf("the API server %s rejects it on a dry run: %s", host, st.Message)
		return []check.Finding{f}, nil
	}
	var out []check.Finding
	for _, c := range st.Details.Causes {
		g := f
		g.Field = c.Field
		g.Source = w.Source.At(c.Field)
		g.Message = fmt.Sprintf("the API server %s rejects it on a dry run: %s", host, c.Message)
		out = append(out, g)
	}
	return out, nil
}
