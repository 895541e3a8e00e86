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

// Package clusterread reads a live cluster's DRA objects, through a
// client that kubectl's flags configured (cmd/gpudra), for the tools that look at a cluster: `gpudra status` and
// `gpudra check --cluster`. It is the only package of the command-line
// tool that talks to an API server; the offline scheduler core and gpudra
// check never import it (their deps test says so), they are handed what
// it read.
package clusterread

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/gpudra/gpudra/internal/version"
)

// ClientFor is a client for cfg (kubectl's flags made it, say) that
// names gpudra's version in its user agent and lists at more than
// client-go's default rate.
func ClientFor(cfg *rest.Config, userAgent string) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent + "/" + version.Get().Version
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

// Want says what to read.
type Want struct {
	Classes, Slices, Claims bool
	// Driver, when set, reads only that driver's ResourceSlices.
	Driver string
	// Namespace, when set, reads ResourceClaims of that namespace only.
	Namespace string
}

// Snapshot is what Read read, each list in the API server's order.
type Snapshot struct {
	Classes []resourceapi.DeviceClass
	Slices  []resourceapi.ResourceSlice
	Claims  []resourceapi.ResourceClaim
}

// Read lists what w asks for, page by page.
func Read(ctx context.Context, client kubernetes.Interface, w Want) (*Snapshot, error) {
	s := &Snapshot{}
	r := client.ResourceV1()
	if w.Classes {
		err := list(ctx, "deviceclasses", "", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.DeviceClasses().List(ctx, o)
		}, func(obj runtime.Object) { s.Classes = append(s.Classes, *obj.(*resourceapi.DeviceClass)) })
		if err != nil {
			return nil, err
		}
	}
	if w.Slices {
		selector := ""
		if w.Driver != "" {
			selector = resourceapi.ResourceSliceSelectorDriver + "=" + w.Driver
		}
		err := list(ctx, "resourceslices", selector, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.ResourceSlices().List(ctx, o)
		}, func(obj runtime.Object) { s.Slices = append(s.Slices, *obj.(*resourceapi.ResourceSlice)) })
		if err != nil {
			return nil, err
		}
	}
	if w.Claims {
		err := list(ctx, "resourceclaims", "", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.ResourceClaims(w.Namespace).List(ctx, o)
		}, func(obj runtime.Object) { s.Claims = append(s.Claims, *obj.(*resourceapi.ResourceClaim)) })
		if err != nil {
			return nil, fmt.Errorf("%w%s", err, inNamespace(w.Namespace))
		}
	}
	return s, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return " (all namespaces)"
	}
	return " (namespace " + ns + ")"
}

// list pages through one resource, calling each for every item.
func list(ctx context.Context, resource, fieldSelector string, fn pager.ListPageFunc, each func(runtime.Object)) error {
	p := pager.New(fn)
	p.PageSize = 500
	err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: fieldSelector}, func(obj runtime.Object) error {
		each(obj)
		return nil
	})
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("list %s: %w (the kubeconfig's user needs list on resource.k8s.io %s)", resource, err, resource)
	}
	return fmt.Errorf("list %s: %w", resource, err)
}
